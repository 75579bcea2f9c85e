package remoting

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// equalCommand reports how a and b differ, or nil. A nil and an empty map or
// body are the same on the wire, so they compare equal.
func equalCommand(a, b *Command) error {
	switch {
	case a.Code != b.Code:
		return fmt.Errorf("code %d != %d", a.Code, b.Code)
	case a.Language != b.Language:
		return fmt.Errorf("language %q != %q", a.Language, b.Language)
	case a.Version != b.Version:
		return fmt.Errorf("version %d != %d", a.Version, b.Version)
	case a.Opaque != b.Opaque:
		return fmt.Errorf("opaque %d != %d", a.Opaque, b.Opaque)
	case a.Flag != b.Flag:
		return fmt.Errorf("flag %d != %d", a.Flag, b.Flag)
	case a.Remark != b.Remark:
		return fmt.Errorf("remark %q != %q", a.Remark, b.Remark)
	case !maps.Equal(a.ExtFields, b.ExtFields):
		return fmt.Errorf("ext %q != %q", a.ExtFields, b.ExtFields)
	case !bytes.Equal(a.Body, b.Body):
		return fmt.Errorf("body %q != %q", a.Body, b.Body)
	case a.Serialize != b.Serialize:
		return fmt.Errorf("serialize %v != %v", a.Serialize, b.Serialize)
	}
	return nil
}

// frameWithHeader builds a whole frame (length field included) around a
// raw header.
func frameWithHeader(typ SerializeType, header, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(typ)<<24|uint32(len(header)))
	b = append(b, header...)
	return append(b, body...)
}

// jsonFrame is frameWithHeader for a JSON header given as text.
func jsonFrame(header string, body []byte) []byte {
	return frameWithHeader(SerializeJSON, []byte(header), body)
}

// goldenDir holds the frames recorded from rocketmq-client-go.
var goldenDir = filepath.Join("testdata", "golden")

// readGoldenFrames returns every golden frame by name (file name without
// .hex). Lines starting with # are comments.
func readGoldenFrames(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	testutil.NoError(t, err)
	if len(files) == 0 {
		t.Fatalf("no golden frames under %s", goldenDir)
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		text, err := os.ReadFile(f)
		testutil.NoError(t, err, f)
		var h strings.Builder
		for line := range strings.Lines(string(text)) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				h.WriteString(line)
			}
		}
		raw, err := hex.DecodeString(h.String())
		testutil.NoError(t, err, f)
		out[strings.TrimSuffix(filepath.Base(f), ".hex")] = raw
	}
	return out
}

// sortedNames returns m's keys in order, for deterministic subtests.
func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor polls until the log holds substr.
func (l *logBuffer) waitFor(t testing.TB, substr string) { l.waitForAfter(t, 0, substr) }

// Len is how much has been logged so far; pass it to waitForAfter to look
// only at what is logged from now on.
func (l *logBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Len()
}

// waitForAfter polls until the log written after offset holds substr.
func (l *logBuffer) waitForAfter(t testing.TB, offset int, substr string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if tail := l.String()[offset:]; !strings.Contains(tail, substr) {
			return fmt.Errorf("log has no %q:\n%s", substr, tail)
		}
		return nil
	})
}

func newTestLogger(level slog.Level) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: level})), lb
}

// startServer binds a server on loopback, lets setup register handlers,
// serves it, and stops it (waiting for Serve to return) when the test ends.
func startServer(t testing.TB, opts ServerOptions, setup func(*Server)) *Server {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	s, err := NewServer(opts)
	testutil.NoError(t, err, "NewServer")
	if setup != nil {
		setup(s)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return s
}

// newTestClient returns a client closed when the test ends.
func newTestClient(t testing.TB, opts ClientOptions) *Client {
	t.Helper()
	c := NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// echoHandler answers SUCCESS with the request's ext fields and body.
func echoHandler(_ context.Context, _ *Conn, req *Command) *Command {
	resp := NewResponse(req, 0, "")
	resp.ExtFields = maps.Clone(req.ExtFields)
	resp.Body = req.Body
	return resp
}

func invokeCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newBufReader wraps r for ReadFrame.
func newBufReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
