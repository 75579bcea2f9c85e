package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/protocol"
)

// The console's admin actions (Options.Admin): create a topic and reset a
// consumer group's offsets. They run as the console's own client, signed
// with Options.AccessKey/SecretKey, so a cluster with ACL on decides
// whether the console may (admin: true in plain_acl.yml). Forms are POSTed
// and guarded against cross-site requests twice: net/http's
// CrossOriginProtection (Sec-Fetch-Site / Origin against Host) and a random
// token the console makes at start and puts in every form.

// Limits of the admin forms.
const (
	adminFormMaxBytes = 16 << 10         // a form body is a few fields
	adminMaxQueues    = 1024             // queues per broker for a new topic
	adminTimeout      = 15 * time.Second // one action, every broker included
)

// adminView is what the admin page renders.
type adminView struct {
	Token  string
	Topics []string
	Groups []string
	At     time.Time
	// CreateForm and ResetForm hold each form's values: the defaults, or
	// the ones just submitted, so a fix needs one change.
	CreateForm, ResetForm map[string]string
	// Result of the last action; nil before any.
	Result *adminResult
}

// adminResult is an action's outcome, shown above the forms.
type adminResult struct {
	OK     bool
	Title  string
	Detail string
	Resets []admin.OffsetReset
}

// newAdminToken returns 32 random hex digits.
func newAdminToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("console: admin token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// adminRoutes adds the admin page and actions to mux, behind cross-origin
// protection.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.logger.Warn("cross-origin admin request refused", "origin", r.Header.Get("Origin"), "path", r.URL.Path)
		s.renderAdmin(w, http.StatusForbidden, nil, &adminResult{Title: "Refused: cross-origin request",
			Detail: "admin actions are accepted only from the console's own pages"})
	}))
	mux.HandleFunc("GET /admin", s.handleAdminPage)
	mux.Handle("POST /admin/topic", cop.Handler(http.HandlerFunc(s.handleAdminCreateTopic)))
	mux.Handle("POST /admin/offset-reset", cop.Handler(http.HandlerFunc(s.handleAdminResetOffset)))
}

func (s *Server) handleAdminPage(w http.ResponseWriter, r *http.Request) {
	s.renderAdmin(w, http.StatusOK, nil, nil)
}

// adminForm parses a POSTed form and checks its token; on failure it has
// answered already and returns nil.
func (s *Server) adminForm(w http.ResponseWriter, r *http.Request) map[string]string {
	r.Body = http.MaxBytesReader(w, r.Body, adminFormMaxBytes)
	if err := r.ParseForm(); err != nil {
		s.renderAdmin(w, http.StatusBadRequest, nil, &adminResult{Title: "Bad form", Detail: err.Error()})
		return nil
	}
	form := map[string]string{}
	for k := range r.PostForm {
		form[k] = strings.TrimSpace(r.PostForm.Get(k))
	}
	if subtle.ConstantTimeCompare([]byte(form["token"]), []byte(s.adminToken)) != 1 {
		s.logger.Warn("admin request without the console's token refused", "path", r.URL.Path, "peer", r.RemoteAddr)
		s.renderAdmin(w, http.StatusForbidden, form, &adminResult{Title: "Refused: missing or stale form token",
			Detail: "reload the admin page (the console restarted?) and submit again"})
		return nil
	}
	if _, polls := s.Snapshot(); polls == 0 {
		s.renderAdmin(w, http.StatusServiceUnavailable, form, &adminResult{Title: "Not connected to the cluster yet",
			Detail: "the console has not reached a name server yet; submit again in a moment"})
		return nil
	}
	return form
}

func (s *Server) handleAdminCreateTopic(w http.ResponseWriter, r *http.Request) {
	form := s.adminForm(w, r)
	if form == nil {
		return
	}
	topic := form["topic"]
	queues, err := strconv.Atoi(form["queues"])
	switch {
	case protocol.ValidateTopic(topic) != nil:
		s.renderAdmin(w, http.StatusBadRequest, form, &adminResult{Title: "Cannot create the topic",
			Detail: "topic: " + protocol.ValidateTopic(topic).Error()})
		return
	case protocol.IsSystemTopic(topic) || strings.HasPrefix(topic, protocol.RetryGroupPrefix) || strings.HasPrefix(topic, protocol.DLQGroupPrefix):
		s.renderAdmin(w, http.StatusBadRequest, form, &adminResult{Title: "Cannot create the topic",
			Detail: topic + " is a system, retry or dead-letter topic"})
		return
	case err != nil || queues < 1 || queues > adminMaxQueues:
		s.renderAdmin(w, http.StatusBadRequest, form, &adminResult{Title: "Cannot create the topic",
			Detail: fmt.Sprintf("queues: want a number within 1..%d, got %q", adminMaxQueues, form["queues"])})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	if err := s.admin.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Queues: queues}); err != nil {
		s.logger.Warn("console: create topic failed", "topic", topic, "err", err)
		s.renderAdmin(w, http.StatusBadGateway, form, &adminResult{Title: "The cluster refused to create " + topic,
			Detail: actionError(err)})
		return
	}
	s.logger.Info("console: topic created", "topic", topic, "queues", queues, "peer", r.RemoteAddr)
	s.renderAdmin(w, http.StatusOK, form, &adminResult{OK: true, Title: "Topic " + topic + " created",
		Detail: fmt.Sprintf("%d queues on every master broker of every IDC; the name servers route it within seconds", queues)})
}

func (s *Server) handleAdminResetOffset(w http.ResponseWriter, r *http.Request) {
	form := s.adminForm(w, r)
	if form == nil {
		return
	}
	group, topic := form["group"], form["topic"]
	target, terr := admin.ParseResetTarget(form["to"], time.Now())
	var bad string
	switch {
	case protocol.ValidateGroup(group) != nil:
		bad = "group: " + protocol.ValidateGroup(group).Error()
	case protocol.ValidateTopic(topic) != nil:
		bad = "topic: " + protocol.ValidateTopic(topic).Error()
	case terr != nil:
		bad = "reset to: " + terr.Error()
	}
	if bad != "" {
		s.renderAdmin(w, http.StatusBadRequest, form, &adminResult{Title: "Cannot reset the offsets", Detail: bad})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	rows, err := s.admin.ResetOffsets(ctx, group, topic, target)
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("topic %s has no readable queue on a live broker", topic)
	}
	if err != nil {
		s.renderAdmin(w, http.StatusBadGateway, form, &adminResult{Title: "Cannot reset the offsets of " + group, Detail: actionError(err)})
		return
	}
	var failed []error
	for _, row := range rows {
		if row.Err != nil {
			failed = append(failed, row.Err)
		}
	}
	res := &adminResult{OK: len(failed) == 0, Resets: rows}
	status := http.StatusOK
	if len(failed) > 0 {
		status = http.StatusBadGateway
		res.Title = fmt.Sprintf("%d of %d queues of %s were not reset", len(failed), len(rows), topic)
		res.Detail = actionError(errors.Join(failed...))
	} else {
		res.Title = fmt.Sprintf("Offsets of %s on %s reset to %s", group, topic, form["to"])
		res.Detail = "every broker committed the new offsets and told the group's running consumers to restart there"
	}
	s.logger.Info("console: offsets reset", "group", group, "topic", topic, "to", form["to"], "failed", len(failed), "peer", r.RemoteAddr)
	s.renderAdmin(w, status, form, res)
}

// actionError words a cluster's refusal for the page: one line, the ACL's
// refusal named as such.
func actionError(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	var re *client.ResponseError
	if errors.As(err, &re) && re.Code == client.CodeNoPermission {
		return "the ACL refused the console's credentials (--access-key needs admin: true in plain_acl.yml): " + msg
	}
	return msg
}

// renderAdmin renders the admin page with status.
func (s *Server) renderAdmin(w http.ResponseWriter, status int, form map[string]string, res *adminResult) {
	if form == nil {
		form = map[string]string{}
	}
	snap, _ := s.Snapshot()
	v := adminView{Token: s.adminToken, At: snap.At, Result: res,
		CreateForm: map[string]string{"queues": "4"}, ResetForm: map[string]string{"to": "earliest"}}
	switch form["form"] {
	case "create-topic":
		v.CreateForm = form
	case "reset-offset":
		v.ResetForm = form
	}
	for _, t := range snap.Topics {
		v.Topics = append(v.Topics, t.Name)
	}
	seen := map[string]bool{}
	for _, g := range snap.Groups {
		if !seen[g.Name] {
			seen[g.Name] = true
			v.Groups = append(v.Groups, g.Name)
		}
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "admin.html", v); err != nil {
		s.logger.Error("rendering the admin page", "err", err)
		http.Error(w, "rendering failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
