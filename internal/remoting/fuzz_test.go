package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
)

// fuzzFrameLimit is the frame limit the fuzz targets decode with: small, so
// that a decoder that allocates by a length field shows up at once.
const fuzzFrameLimit = 1 << 16

// fuzzAllocBudget bounds what decoding one input may allocate: a few times
// the frame limit for the frame, the header's strings and map, and slack
// for the runtime. An allocation sized by an unchecked length field (up to
// 2 GiB) is far above it.
const fuzzAllocBudget = 8*fuzzFrameLimit + 1<<20

// badFrameSeeds are hand-made frames each decoder must refuse cleanly.
func badFrameSeeds() [][]byte {
	header, cuts := binaryHeaderFieldCuts()
	seeds := [][]byte{
		{},
		{0, 0},
		{0, 0, 0, 3, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 2, '{', '}'},
		{0x01, 0x00, 0x00, 0x01, 0, 0, 0, 2, '{', '}'},
		{0, 0, 0, 6, 0, 0, 0, 9, '{', '}'},
		{0, 0, 0, 4, 0, 0, 0, 0},
		frameWithHeader(2, []byte("{}"), nil),
		jsonFrame(`{"code":`, nil),
		jsonFrame(`{"code":1,"extFields":{"a":{"b":1}}}`, nil),
		jsonFrame(`{"code":1e400}`, []byte("body")),
		jsonFrame(`{"code":"12","language":9,"extFields":{"n":1,"b":true,"z":null}}`, []byte{0}),
		jsonFrame(`null`, nil),
		// Two good frames back to back: the stream case.
		append(EncodeFrame(&Command{Code: 1, Opaque: 1}), EncodeFrame(&Command{Code: 2, Opaque: 2, Serialize: SerializeRocketMQ, Body: []byte("b")})...),
	}
	for _, cut := range cuts {
		seeds = append(seeds, frameWithHeader(SerializeRocketMQ, header[:cut], nil))
	}
	return seeds
}

// twoPartReader hands out first, then second, then EOF, so a frame split
// across two reads reaches the decoder in two pieces.
type twoPartReader struct{ parts [2][]byte }

func (r *twoPartReader) Read(p []byte) (int, error) {
	for i := range r.parts {
		if len(r.parts[i]) > 0 {
			n := copy(p, r.parts[i])
			r.parts[i] = r.parts[i][n:]
			return n, nil
		}
	}
	return 0, io.EOF
}

// streamResult is what reading frames off a stream until the first error
// produced.
type streamResult struct {
	cmds []*Command
	err  error
}

func readStream(r io.Reader) streamResult {
	// The smallest bufio buffer, so frames straddle refills.
	br := bufio.NewReaderSize(r, 16)
	var res streamResult
	for {
		cmd, err := ReadFrame(br, fuzzFrameLimit)
		if err != nil {
			res.err = err
			return res
		}
		res.cmds = append(res.cmds, cmd)
	}
}

// errorClass reduces an error to what the read loop acts on.
func errorClass(err error) string {
	var fe *FrameError
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, io.EOF):
		return "EOF"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.Is(err, ErrFrameTooLarge):
		return "too large"
	case errors.As(err, &fe):
		return "frame error: " + fe.Reason
	}
	return "other: " + err.Error()
}

func sameStream(a, b streamResult) error {
	if len(a.cmds) != len(b.cmds) {
		return fmt.Errorf("%d frames != %d frames", len(a.cmds), len(b.cmds))
	}
	for i := range a.cmds {
		if err := equalCommand(a.cmds[i], b.cmds[i]); err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
	}
	if ca, cb := errorClass(a.err), errorClass(b.err); ca != cb {
		return fmt.Errorf("error %q != %q", ca, cb)
	}
	return nil
}

// withDefaultLanguage is cmd as the encoder writes it: a missing language
// goes out as GO.
func withDefaultLanguage(cmd *Command) *Command {
	c := *cmd
	if c.Language == "" {
		c.Language = Language
	}
	return &c
}

// checkReencode re-encodes a decoded command and insists it decodes the same.
func checkReencode(t *testing.T, cmd *Command) {
	t.Helper()
	again, err := DecodeWholeFrame(EncodeFrame(cmd))
	if err != nil {
		t.Fatalf("re-encoded %v does not decode: %v", cmd, err)
	}
	if err := equalCommand(again, withDefaultLanguage(cmd)); err != nil {
		t.Fatalf("re-encode changed the command: %v", err)
	}
}

func addFrameSeeds(f *testing.F) {
	for _, raw := range readGoldenFrames(f) {
		f.Add(raw)
		// The same command in a binary header.
		if cmd, err := DecodeWholeFrame(raw); err == nil {
			cmd.Serialize = SerializeRocketMQ
			f.Add(EncodeFrame(cmd))
		}
	}
	for _, raw := range badFrameSeeds() {
		f.Add(raw)
	}
}

// FuzzDecodeFrame feeds arbitrary bytes to the frame reader as one piece and
// split in two at several points; the outcomes must agree, nothing may
// panic, no input may make the decoder allocate by its length field, and
// every frame that decodes must survive a re-encode.
func FuzzDecodeFrame(f *testing.F) {
	addFrameSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var whole streamResult
		if n := allocatedDuring(func() { whole = readStream(bytes.NewReader(data)) }); n > fuzzAllocBudget {
			t.Fatalf("decoding %d bytes allocated %d bytes", len(data), n)
		}
		if len(data) >= 4 && int32(binary.BigEndian.Uint32(data)) > fuzzFrameLimit && len(whole.cmds) == 0 {
			if !errors.Is(whole.err, ErrFrameTooLarge) {
				t.Fatalf("oversize length field gave %v", whole.err)
			}
		}
		for _, cut := range []int{1, len(data) / 2, len(data) - 1} {
			if cut <= 0 || cut >= len(data) {
				continue
			}
			split := readStream(&twoPartReader{parts: [2][]byte{data[:cut], data[cut:]}})
			if err := sameStream(whole, split); err != nil {
				t.Fatalf("split at %d of %d: %v", cut, len(data), err)
			}
		}
		for _, cmd := range whole.cmds {
			if cmd.Serialize != SerializeJSON && cmd.Serialize != SerializeRocketMQ {
				t.Fatalf("decoded serialize type %d", cmd.Serialize)
			}
			checkReencode(t, cmd)
		}
		// DecodeFrame takes the bytes after the length field as a frame.
		if cmd, err := DecodeFrame(data); err == nil {
			checkReencode(t, cmd)
		}
	})
}

// FuzzDecodeJSONHeader drives the JSON header decoder directly.
func FuzzDecodeJSONHeader(f *testing.F) {
	for _, raw := range readGoldenFrames(f) {
		hl := binary.BigEndian.Uint32(raw[4:]) & 0xFFFFFF
		f.Add(raw[8 : 8+hl])
	}
	for _, h := range []string{`{}`, `null`, `{"code":"1"}`, `{"extFields":{"a":1,"b":true,"c":null}}`,
		`{"language":9}`, `{"remark":"\u0000\ud800"}`, `{"code":1,"extFields":{"a":[]}}`, `[`} {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		cmd, err := decodeJSONHeader(header)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FrameError", err)
			}
			return
		}
		again, err := decodeJSONHeader(appendJSONHeader(nil, cmd))
		if err != nil {
			t.Fatalf("re-encoded header does not decode: %v", err)
		}
		if err := equalCommand(again, withDefaultLanguage(cmd)); err != nil {
			t.Fatalf("re-encode changed the header: %v", err)
		}
	})
}

// FuzzDecodeBinaryHeader drives the ROCKETMQ header decoder directly.
func FuzzDecodeBinaryHeader(f *testing.F) {
	for _, raw := range readGoldenFrames(f) {
		if cmd, err := DecodeWholeFrame(raw); err == nil {
			f.Add(appendBinaryHeader(nil, cmd))
		}
	}
	header, cuts := binaryHeaderFieldCuts()
	f.Add(header)
	for _, cut := range cuts {
		f.Add(header[:cut])
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		var cmd *Command
		var err error
		if n := allocatedDuring(func() { cmd, err = decodeBinaryHeader(header, false) }); n > fuzzAllocBudget+uint64(4*len(header)) {
			t.Fatalf("decoding a %d-byte header allocated %d bytes", len(header), n)
		}
		// The lazy decoding the read loop uses accepts exactly the same
		// headers and gives the same fields, by lookup and as a map.
		lazy, lazyErr := decodeBinaryHeader(header, true)
		if (lazyErr == nil) != (err == nil) {
			t.Fatalf("eager decode error %v, lazy decode error %v", err, lazyErr)
		}
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FrameError", err)
			}
			return
		}
		for k, v := range cmd.ExtFields {
			if got, ok := lazy.ExtValue(k); !ok || got != v {
				t.Fatalf("lazy ExtValue(%q) = %q, %v; want %q", k, got, ok, v)
			}
		}
		if m := lazy.ExtMap(); len(m) != len(cmd.ExtFields) {
			t.Fatalf("lazy ExtMap has %d fields, want %d", len(m), len(cmd.ExtFields))
		}
		if err := equalCommand(lazy, cmd); err != nil {
			t.Fatalf("lazy decode differs once mapped: %v", err)
		}
		again, err := decodeBinaryHeader(appendBinaryHeader(nil, cmd), false)
		if err != nil {
			t.Fatalf("re-encoded header does not decode: %v", err)
		}
		if err := equalCommand(again, cmd); err != nil {
			t.Fatalf("re-encode changed the header: %v", err)
		}
	})
}
