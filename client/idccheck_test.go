package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientUnknownIDCRefused: an IDC the address server does not list is
// refused at Start with the known ones named, unless AllowUnknownIDC; a
// known one, in any case, starts.
func TestClientUnknownIDCRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `[{"addr":"127.0.1.1:1","idc":"idc1","alive":true},{"addr":"127.0.2.1:1","idc":"idc2","alive":false}]`)
	}))
	t.Cleanup(srv.Close)
	start := func(idcName string, allow bool) error {
		p, err := NewProducer(ProducerConfig{ClientConfig: ClientConfig{
			AddrsrvURLs: []string{srv.URL}, IDC: idcName, AllowUnknownIDC: allow,
			Logger: slog.New(slog.DiscardHandler),
		}})
		testutil.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = p.Start(ctx)
		p.Shutdown(ctx)
		return err
	}
	err := start("idc9", false)
	testutil.True(t, errors.Is(err, ErrUnknownIDC), "idc9 refused with ErrUnknownIDC", err)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "idc1, idc2"), "known IDCs listed", err)
	testutil.NoError(t, start("idc9", true), "a client-only IDC allowed")
	testutil.NoError(t, start("IDC2", false), "a known IDC, any case")
}
