package addrsrv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestAddrsrvTLS: an address server serving HTTPS and HTTP on one port
// (permissive) probes a name server that enforces TLS over TLS and reports
// it alive to both kinds of client.
func TestAddrsrvTLS(t *testing.T) {
	certFile, keyFile := testutil.SelfSignedCert(t, t.TempDir(), "zonemq", "127.0.1.1")
	no := namesrv.NewOptions()
	no.Listen, no.IDC, no.KVConfigPath = "127.0.1.1:0", "idc1", ""
	no.TLSMode, no.TLSCertFile, no.TLSKeyFile = remoting.TLSEnforcing, certFile, keyFile
	ns, err := namesrv.New(no)
	testutil.NoError(t, err, "namesrv.New")
	nsDone := make(chan error, 1)
	go func() { nsDone <- ns.Run(context.Background()) }()
	t.Cleanup(func() { ns.Shutdown(); testutil.NoError(t, <-nsDone) })

	clientTLS, err := remoting.ClientTLSConfig(certFile, false)
	testutil.NoError(t, err)
	o := addrsrv.NewOptions()
	o.Listen, o.IDC = "127.0.1.1:0", "idc1"
	o.Namesrvs = []addrsrv.Namesrv{{Addr: ns.Addr(), IDC: "idc1"}}
	o.ProbeInterval, o.ProbeTimeout = testInterval, 2*time.Second
	o.TLSMode, o.TLSCertFile, o.TLSKeyFile = remoting.TLSPermissive, certFile, keyFile
	o.ProbeTLS = clientTLS
	s, err := addrsrv.New(o)
	testutil.NoError(t, err, "addrsrv.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() { s.Shutdown(); testutil.NoError(t, <-done) })

	httpsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	t.Cleanup(httpsClient.CloseIdleConnections)
	for _, c := range []struct {
		base   string
		client *http.Client
	}{
		{"https://" + s.Addr(), httpsClient},
		{"http://" + s.Addr(), http.DefaultClient},
	} {
		testutil.Eventually(t, 10*time.Second, func() error {
			resp, err := c.client.Get(c.base + "/v1/namesrvs")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var list []namesrvEntry
			if err := json.Unmarshal(b, &list); err != nil {
				return fmt.Errorf("%s: %v", b, err)
			}
			if len(list) != 1 || !list[0].Alive || list[0].LastProbe == "" || list[0].LastError != "" {
				return fmt.Errorf("name servers: %s", b)
			}
			return nil
		})
	}
}
