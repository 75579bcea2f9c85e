package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/zonemq/zonemq/client/admin"
)

// traceEventJSON is one event of `admin trace --output json`.
type traceEventJSON struct {
	Type        string `json:"type"`
	Time        string `json:"time"`
	Group       string `json:"group"`
	Topic       string `json:"topic,omitempty"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId,omitempty"`
	Tags        string `json:"tags,omitempty"`
	Keys        string `json:"keys,omitempty"`
	StoreHost   string `json:"storeHost,omitempty"`
	Broker      string `json:"broker,omitempty"`
	IDC         string `json:"idc,omitempty"`
	ClientHost  string `json:"clientHost,omitempty"`
	ClientID    string `json:"clientId,omitempty"`  // the producer or consumer, while it is connected
	ClientIDC   string `json:"clientIdc,omitempty"` // the IDC its client id carries
	RequestID   string `json:"requestId,omitempty"`
	CostMillis  int64  `json:"costMs"`
	Success     bool   `json:"success"`
	RetryTimes  int    `json:"retryTimes"`
}

func runAdminTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("trace", "(--msg-id ID | --key K) [--output text|json]", stderr)
	msgID := s.fs.String("msg-id", "", "the message id (UNIQ_KEY, the send result's msgId)")
	key := s.fs.String("key", "", "a message key: the life of every traced message with that key")
	check := func() error {
		if (*msgID == "") == (*key == "") {
			return usagef("give one of --msg-id and --key")
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()

	var evs []admin.TraceEvent
	var err error
	what := "message " + *msgID
	if *msgID != "" {
		evs, err = s.admin.MessageTrace(ctx, *msgID)
	} else {
		what = "key " + *key
		evs, err = s.admin.TraceByKey(ctx, *key)
	}
	if err != nil && len(evs) == 0 {
		return fmt.Errorf("reading the trace of %s: %s", what, oneLine(err.Error()))
	}
	if err != nil {
		fmt.Fprintf(stderr, "warning: some brokers could not be read: %s\n", oneLine(err.Error()))
	}
	if s.json() {
		out := []traceEventJSON{}
		for _, e := range evs {
			out = append(out, traceEventJSON{Type: e.Type, Time: e.Time.Format(time.RFC3339Nano), Group: e.Group, Topic: e.Topic,
				MsgID: e.MsgID, OffsetMsgID: e.OffsetMsgID, Tags: e.Tags, Keys: e.Keys, StoreHost: e.StoreHost, Broker: e.Broker,
				IDC: e.IDC, ClientHost: e.ClientHost, ClientID: e.ClientID, ClientIDC: e.ClientIDC, RequestID: e.RequestID, CostMillis: e.Cost.Milliseconds(), Success: e.Success,
				RetryTimes: e.RetryTimes})
		}
		return printJSON(stdout, out)
	}
	if len(evs) == 0 {
		return errors.New("no trace of " + what + " (are the clients' message traces on? WithTrace / enableMsgTrace)")
	}
	t := newTable(stdout, "TIME", "MSG ID", "EVENT", "GROUP", "CLIENT", "CLIENT IDC", "BROKER", "BROKER IDC", "STATUS", "COST")
	for _, e := range evs {
		event, status := traceWords(e)
		who, whoIDC := e.ClientHost, e.ClientIDC
		if e.ClientID != "" {
			who = e.ClientID
		}
		if whoIDC == "" {
			whoIDC = "-"
		}
		t.row(e.Time.Format("15:04:05.000"), e.MsgID, event, e.Group, who, whoIDC, e.Broker, e.IDC, status, e.Cost)
	}
	return t.flush()
}

// traceWords describes an event for the text table.
func traceWords(e admin.TraceEvent) (event, status string) {
	ok := map[bool]string{true: "ok", false: "failed"}
	switch e.Type {
	case admin.TracePublish:
		event = "produced to " + e.Topic
		if e.Broker == "" {
			event += " (stored at " + e.StoreHost + ")"
		}
		return event, ok[e.Success]
	case admin.TraceConsumeStart:
		if e.RetryTimes > 0 {
			return fmt.Sprintf("delivered (retry %d)", e.RetryTimes), "-"
		}
		return "delivered", "-"
	}
	return "consumed", ok[e.Success]
}
