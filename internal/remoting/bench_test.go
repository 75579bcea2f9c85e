package remoting

import (
	"bufio"
	"bytes"
	"context"
	"testing"
)

// benchSendCommand is a SEND_MESSAGE as rocketmq-client-go sends it: a JSON
// header with 14 ext fields and a 1 KiB body.
func benchSendCommand() *Command {
	return &Command{Code: 10, Language: "GO", Version: 317, Opaque: 12345, ExtFields: sendMessageExt(),
		Body: bytes.Repeat([]byte("0123456789abcdef"), 64)}
}

func BenchmarkEncodeFrame(b *testing.B) {
	for _, typ := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		b.Run(typ.String(), func(b *testing.B) {
			cmd := benchSendCommand()
			cmd.Serialize = typ
			buf := AppendFrame(nil, cmd)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendFrame(buf[:0], cmd)
			}
		})
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	for _, typ := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		b.Run(typ.String(), func(b *testing.B) {
			cmd := benchSendCommand()
			cmd.Serialize = typ
			frame := EncodeFrame(cmd)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			r := bytes.NewReader(frame)
			br := bufio.NewReader(r)
			for b.Loop() {
				r.Reset(frame)
				br.Reset(r)
				if _, err := ReadFrame(br, DefaultMaxFrameSize); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInvoke is a full request/response round trip over loopback, many
// callers sharing the client's one connection.
func BenchmarkInvoke(b *testing.B) {
	s := startServer(b, ServerOptions{}, func(s *Server) { s.Handle(10, echoHandler) })
	c := newTestClient(b, ClientOptions{})
	ctx := context.Background()
	if _, err := c.Conn(ctx, s.Addr()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := benchSendCommand()
			if _, err := c.Invoke(ctx, s.Addr(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
