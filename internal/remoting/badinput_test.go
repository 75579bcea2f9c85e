package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestServerBadInput sends each kind of broken input on its own connection
// and checks what the server does: close the connection and log why, or
// answer with an error and carry on. Afterwards a well-behaved client is
// still served.
func TestServerBadInput(t *testing.T) {
	logger, logs := newTestLogger(slog.LevelInfo)
	s := startServer(t, ServerOptions{Logger: logger, MaxFrameSize: 1 << 20}, func(s *Server) { s.Handle(1, echoHandler) })

	lenField := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	header, cuts := binaryHeaderFieldCuts()
	type badCase struct {
		name  string
		input []byte
		// halfClose ends our side after input, as a peer that hangs up does.
		halfClose bool
		// log is the line the server must write; "" means the case answers
		// with an error response of code respCode instead.
		log      string
		respCode int32
	}
	cases := []badCase{
		{name: "short frame", input: append(lenField(100), 0, 0, 0, 2, '{', '}'), halfClose: true,
			log: "in the middle of a frame"},
		{name: "length field below 4", input: append(lenField(3), 0, 0, 0), log: "length field 3 is below 4"},
		{name: "negative length field", input: lenField(0xFFFFFFFF), log: "length field -1 is below 4"},
		// No body follows: the server must refuse on the length field alone,
		// not wait for (or allocate) 2 GiB.
		{name: "oversize length field", input: lenField(0x7FFFFFFF), log: "frame exceeds the size limit"},
		{name: "just over the limit", input: lenField(1<<20 + 1), log: "frame exceeds the size limit"},
		{name: "header length beyond frame", input: []byte{0, 0, 0, 6, 0, 0, 0, 50, '{', '}'},
			log: "header length 50 exceeds frame length 2"},
		{name: "invalid JSON header", input: jsonFrame(`{"code":1,`, nil), log: "invalid JSON header"},
		{name: "non-scalar ext value", input: jsonFrame(`{"code":1,"extFields":{"a":{}}}`, nil), log: "is not a scalar"},
		{name: "code beyond int32", input: jsonFrame(`{"code":99999999999}`, nil), log: "is not a 32-bit integer"},
		{name: "unknown serialize type", input: frameWithHeader(3, []byte("{}"), nil), log: "unknown serialize type 3"},
		{name: "unknown code", input: jsonFrame(`{"code":4242,"opaque":8}`, nil), respCode: ResponseCodeNotSupported},
	}
	for _, field := range sortedNames(cuts) {
		cut := header[:cuts[field]]
		_, err := decodeBinaryHeader(cut, false)
		testutil.True(t, err != nil, field)
		var fe *FrameError
		testutil.True(t, errors.As(err, &fe), field)
		cases = append(cases, badCase{
			name:  "binary header truncated in " + field,
			input: frameWithHeader(SerializeRocketMQ, cut, nil),
			log:   fe.Reason,
		})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logged := logs.Len()
			nc, err := net.Dial("tcp", s.Addr())
			testutil.NoError(t, err)
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = nc.Write(tc.input)
			testutil.NoError(t, err)
			if tc.halfClose {
				testutil.NoError(t, nc.(*net.TCPConn).CloseWrite())
			}
			if tc.log == "" {
				resp, err := ReadFrame(newBufReader(nc), DefaultMaxFrameSize)
				testutil.NoError(t, err, "reading the error response")
				testutil.Equal(t, resp.Code, tc.respCode)
				testutil.True(t, resp.Remark != "", "remark says why")
				// The connection stays open and usable.
				_, err = nc.Write(EncodeFrame(&Command{Code: 1, Opaque: 9, ExtFields: map[string]string{"still": "here"}}))
				testutil.NoError(t, err)
				resp, err = ReadFrame(newBufReader(nc), DefaultMaxFrameSize)
				testutil.NoError(t, err)
				testutil.Equal(t, resp.Ext("still"), "here")
				return
			}
			// The server closes without answering...
			rest, err := io.ReadAll(nc)
			testutil.NoError(t, err, "read until the server closes")
			testutil.Equal(t, len(rest), 0, "bytes sent back")
			// ...and says why.
			logs.waitForAfter(t, logged, tc.log)
		})
	}

	// A good client is still served, and no bad connection lingers.
	c := newTestClient(t, ClientOptions{})
	resp, err := c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(1, map[string]string{"ok": "1"}, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Ext("ok"), "1")
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(s.Conns()); n != 1 {
			return fmt.Errorf("%d server connections, want 1", n)
		}
		return nil
	})
	testutil.True(t, strings.Count(logs.String(), "malformed frame") >= len(cases)-2, "one log line per malformed frame")
}
