package netns

import (
	"context"
	"net"
)

// Dialer returns a dial function whose connections start in IDC n's
// namespace, with the signature of client.Config.Dial. A program that stays
// in the root namespace (the drill) gives each IDC's SDK clients their IDC's
// Dialer, so when the IDC is cut off its clients are cut off with it, as
// real applications in that IDC would be.
//
// The socket is created on the calling goroutine's thread inside Do; the
// dial must therefore target an IP address, not a name whose lookup could
// run elsewhere.
func (t *Topology) Dialer(n int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := t.Do(n, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}
