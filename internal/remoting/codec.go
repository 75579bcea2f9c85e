package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxFrameSize is the largest frame accepted by default (RocketMQ's
// com.rocketmq.remoting.frameMaxLength).
const DefaultMaxFrameSize = 16 << 20

// minFrameLength is the smallest legal value of the length field: the
// header-length word alone.
const minFrameLength = 4

// ErrFrameTooLarge is returned when a frame's length field exceeds the limit.
var ErrFrameTooLarge = errors.New("remoting: frame exceeds the size limit")

// FrameError describes a frame that cannot be decoded. The connection that
// carried it cannot be trusted to be in sync any more and is closed.
type FrameError struct {
	Reason string
	Err    error
}

func (e *FrameError) Error() string {
	if e.Err != nil {
		return "remoting: malformed frame: " + e.Reason + ": " + e.Err.Error()
	}
	return "remoting: malformed frame: " + e.Reason
}

func (e *FrameError) Unwrap() error { return e.Err }

// ReadFrame reads one frame from r and decodes it. The length field is checked
// against maxFrame before any allocation.
func ReadFrame(r *bufio.Reader, maxFrame int) (*Command, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(lenBuf[:])))
	if n < minFrameLength {
		return nil, &FrameError{Reason: fmt.Sprintf("length field %d is below %d", n, minFrameLength)}
	}
	if n > int64(maxFrame) {
		return nil, fmt.Errorf("%w: %d > %d bytes", ErrFrameTooLarge, n, maxFrame)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return DecodeFrame(frame)
}

// DecodeFrame decodes the part of a frame after the length field: the
// header-length word, the header and the body. The returned command's Body
// aliases frame.
func DecodeFrame(frame []byte) (*Command, error) {
	return decodeFrame(frame, false)
}

// DecodeFrameRawExt is DecodeFrame as a connection's read loop decodes: a
// binary header's ext fields are left in their wire form (RawExt).
func DecodeFrameRawExt(frame []byte) (*Command, error) {
	return decodeFrame(frame, true)
}

// decodeFrame is DecodeFrame; with lazyExt, the ext fields of a binary
// header are checked but left in their wire form (Command.rawExt) for a
// receiver that reads them through Ext or ExtValue, and decoded into a map
// only when ExtMap asks.
func decodeFrame(frame []byte, lazyExt bool) (*Command, error) {
	if len(frame) < minFrameLength {
		return nil, &FrameError{Reason: "frame shorter than its header-length field"}
	}
	word := binary.BigEndian.Uint32(frame)
	typ := SerializeType(word >> 24)
	headerLen := int(word & 0xFFFFFF)
	if headerLen > len(frame)-4 {
		return nil, &FrameError{Reason: fmt.Sprintf("header length %d exceeds frame length %d", headerLen, len(frame)-4)}
	}
	header := frame[4 : 4+headerLen]
	var (
		cmd *Command
		err error
	)
	switch typ {
	case SerializeJSON:
		cmd, err = decodeJSONHeader(header)
	case SerializeRocketMQ:
		cmd, err = decodeBinaryHeader(header, lazyExt)
	default:
		return nil, &FrameError{Reason: fmt.Sprintf("unknown serialize type %d", typ)}
	}
	if err != nil {
		return nil, err
	}
	cmd.Serialize = typ
	if body := frame[4+headerLen:]; len(body) > 0 {
		cmd.Body = body
	}
	return cmd, nil
}

// jsonHeader is the wire shape of a JSON header. language and the ext values
// are decoded leniently: Java and older clients send numbers and booleans
// where strings are expected.
type jsonHeader struct {
	Code      json.Number                `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   json.Number                `json:"version"`
	Opaque    json.Number                `json:"opaque"`
	Flag      json.Number                `json:"flag"`
	Remark    *string                    `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// decodeJSONHeader decodes a JSON header: by hand when the fast decoder is
// sure of the answer, otherwise (and for every error) with encoding/json.
func decodeJSONHeader(b []byte) (*Command, error) {
	if cmd, err := decodeJSONHeaderFast(b); err == nil {
		return cmd, nil
	}
	return decodeJSONHeaderStd(b)
}

// decodeJSONHeaderStd is the reference decoder: encoding/json, leniently.
func decodeJSONHeaderStd(b []byte) (*Command, error) {
	var h jsonHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, &FrameError{Reason: "invalid JSON header", Err: err}
	}
	cmd := &Command{}
	var err error
	if cmd.Code, err = int32Field("code", h.Code); err != nil {
		return nil, err
	}
	if cmd.Version, err = int32Field("version", h.Version); err != nil {
		return nil, err
	}
	if cmd.Opaque, err = int32Field("opaque", h.Opaque); err != nil {
		return nil, err
	}
	if cmd.Flag, err = int32Field("flag", h.Flag); err != nil {
		return nil, err
	}
	if h.Remark != nil {
		cmd.Remark = *h.Remark
	}
	if len(h.Language) > 0 {
		cmd.Language = scalarText(h.Language)
	}
	if len(h.ExtFields) > 0 {
		cmd.ExtFields = make(map[string]string, len(h.ExtFields))
		for k, v := range h.ExtFields {
			if string(v) == "null" {
				continue
			}
			if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
				return nil, &FrameError{Reason: fmt.Sprintf("ext field %q is not a scalar", k)}
			}
			cmd.ExtFields[k] = scalarText(v)
		}
	}
	return cmd, nil
}

// scalarText renders a JSON scalar as text: strings unquoted, everything
// else as written.
func scalarText(v json.RawMessage) string {
	if len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return string(v)
}

func int32Field(name string, n json.Number) (int32, error) {
	if n == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, &FrameError{Reason: fmt.Sprintf("header field %s=%s is not a 32-bit integer", name, n)}
	}
	return int32(v), nil
}

// languageCodes maps the binary header's language byte to its name.
var languageCodes = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

func languageName(code byte) string {
	if int(code) < len(languageCodes) {
		return languageCodes[code]
	}
	return "OTHER"
}

func languageCode(name string) byte {
	for i, n := range languageCodes {
		if n == name {
			return byte(i)
		}
	}
	if v, err := strconv.Atoi(name); err == nil && v >= 0 && v < 256 {
		return byte(v)
	}
	return 7 // OTHER
}

// binaryFixedLen is the fixed part of a ROCKETMQ header: code(2) language(1)
// version(2) opaque(4) flag(4) remark length(4) ext length(4).
const binaryFixedLen = 21

func decodeBinaryHeader(b []byte, lazyExt bool) (*Command, error) {
	if len(b) < binaryFixedLen {
		return nil, &FrameError{Reason: fmt.Sprintf("binary header of %d bytes is shorter than %d", len(b), binaryFixedLen)}
	}
	cmd := &Command{
		Code:     int32(int16(binary.BigEndian.Uint16(b[0:]))),
		Language: languageName(b[2]),
		Version:  int32(int16(binary.BigEndian.Uint16(b[3:]))),
		Opaque:   int32(binary.BigEndian.Uint32(b[5:])),
		Flag:     int32(binary.BigEndian.Uint32(b[9:])),
	}
	rest := b[13:]
	remarkLen := int(int32(binary.BigEndian.Uint32(rest)))
	rest = rest[4:]
	if remarkLen < 0 || remarkLen > len(rest) {
		return nil, &FrameError{Reason: fmt.Sprintf("binary header remark length %d out of range", remarkLen)}
	}
	cmd.Remark = string(rest[:remarkLen])
	rest = rest[remarkLen:]
	if len(rest) < 4 {
		return nil, &FrameError{Reason: "binary header truncated before ext fields"}
	}
	extLen := int(int32(binary.BigEndian.Uint32(rest)))
	rest = rest[4:]
	if extLen < 0 || extLen > len(rest) {
		return nil, &FrameError{Reason: fmt.Sprintf("binary header ext length %d out of range", extLen)}
	}
	ext := rest[:extLen]
	if len(ext) == 0 {
		return cmd, nil
	}
	if err := checkBinaryExt(ext); err != nil {
		return nil, err
	}
	if lazyExt {
		cmd.rawExt = string(ext)
		return cmd, nil
	}
	if len(ext) <= jsonSharedBackingMax {
		// Keys and values are slices of one copy of the ext bytes (one
		// allocation instead of two per field).
		cmd.ExtFields = binaryExtMap(string(ext))
		return cmd, nil
	}
	// A large one is copied field by field so a retained value cannot pin
	// it.
	m := binaryExtMap(string(ext))
	cmd.ExtFields = make(map[string]string, len(m))
	for k, v := range m {
		cmd.ExtFields[strings.Clone(k)] = strings.Clone(v)
	}
	return cmd, nil
}

// checkBinaryExt checks that ext is a well-formed run of binary ext
// fields: key length (2 bytes), key, value length (4 bytes), value.
func checkBinaryExt(ext []byte) error {
	for len(ext) > 0 {
		if len(ext) < 2 {
			return &FrameError{Reason: "binary ext field truncated in key length"}
		}
		kl := int(binary.BigEndian.Uint16(ext))
		ext = ext[2:]
		if kl > len(ext) {
			return &FrameError{Reason: "binary ext key longer than the header"}
		}
		ext = ext[kl:]
		if len(ext) < 4 {
			return &FrameError{Reason: "binary ext field truncated in value length"}
		}
		vl := int(int32(binary.BigEndian.Uint32(ext)))
		ext = ext[4:]
		if vl < 0 || vl > len(ext) {
			return &FrameError{Reason: "binary ext value longer than the header"}
		}
		ext = ext[vl:]
	}
	return nil
}

// binaryExtMap decodes well-formed binary ext fields into a map whose keys
// and values are substrings of ext.
func binaryExtMap(ext string) map[string]string {
	n := 0
	for rest := ext; ; n++ {
		var ok bool
		if _, _, rest, ok = NextBinaryExt(rest); !ok {
			break
		}
	}
	m := make(map[string]string, n)
	for {
		k, v, rest, ok := NextBinaryExt(ext)
		if !ok {
			return m
		}
		m[k] = v
		ext = rest
	}
}

// binaryExtValue finds key in well-formed binary ext fields; a key sent
// twice has its last value, as in the map. A plain loop: this runs for
// every field a handler reads.
func binaryExtValue(ext, key string) (val string, found bool) {
	for {
		k, v, rest, ok := NextBinaryExt(ext)
		if !ok {
			return val, found
		}
		if k == key {
			val, found = v, true
		}
		ext = rest
	}
}

// RawExt returns the command's ext fields still in their ROCKETMQ wire
// form, for a reader that walks them once with NextBinaryExt; ok is false
// when they were decoded into ExtFields (or there are none).
func (c *Command) RawExt() (raw string, ok bool) { return c.rawExt, c.rawExt != "" }

// NextBinaryExt splits the first field off ext, a run of fields in the
// ROCKETMQ binary encoding as RawExt returns it; ok is false at the end.
func NextBinaryExt(ext string) (key, val, rest string, ok bool) {
	if len(ext) < 2 {
		return "", "", "", false
	}
	kl := int(ext[0])<<8 | int(ext[1])
	if 2+kl+4 > len(ext) {
		return "", "", "", false
	}
	key = ext[2 : 2+kl]
	ext = ext[2+kl:]
	vl := int(int32(uint32(ext[0])<<24 | uint32(ext[1])<<16 | uint32(ext[2])<<8 | uint32(ext[3])))
	if vl < 0 || 4+vl > len(ext) {
		return "", "", "", false
	}
	return key, ext[4 : 4+vl], ext[4+vl:], true
}

// AppendFrame appends the whole wire frame of cmd (length field included),
// encoding the header as cmd.Serialize says.
func AppendFrame(dst []byte, cmd *Command) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // length, type+header length
	hstart := len(dst)
	if cmd.Serialize == SerializeRocketMQ {
		dst = appendBinaryHeader(dst, cmd)
	} else {
		dst = appendJSONHeader(dst, cmd)
	}
	headerLen := len(dst) - hstart
	dst = append(dst, cmd.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(cmd.Serialize)<<24|uint32(headerLen)&0xFFFFFF)
	return dst
}

// EncodeFrame returns the wire frame of cmd.
func EncodeFrame(cmd *Command) []byte {
	return AppendFrame(make([]byte, 0, 256+len(cmd.Body)), cmd)
}

// appendJSONHeader writes a compact JSON header with sorted ext keys, every
// ext value a JSON string (the Go client drops a frame with anything else).
func appendJSONHeader(dst []byte, cmd *Command) []byte {
	lang := cmd.Language
	if lang == "" {
		lang = Language
	}
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(cmd.Code), 10)
	dst = append(dst, `,"language":`...)
	dst = appendJSONString(dst, lang)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(cmd.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(cmd.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(cmd.Flag), 10)
	if cmd.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, cmd.Remark)
	}
	if cmd.Header != nil {
		const open = `,"extFields":{`
		e := getExtEncoder(append(dst, open...), true)
		cmd.Header.EncodeExt(e)
		dst = e.dst
		n := e.n
		putExtEncoder(e)
		if n == 0 {
			dst = dst[:len(dst)-len(open)]
		} else {
			dst = append(dst, '}')
		}
	} else if len(cmd.ExtFields) > 0 {
		dst = append(dst, `,"extFields":{`...)
		var keyBuf [keyBufSize]string
		for i, k := range sortedKeys(keyBuf[:0], cmd.ExtFields) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONString(dst, cmd.ExtFields[k])
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"serializeTypeCurrentRPC":"JSON"}`...)
	return dst
}

// sortedKeys appends m's keys to dst in order. Callers pass a small array
// of their own, so the usual header (a few to twenty fields) allocates no
// slice.
func sortedKeys(dst []string, m map[string]string) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

// keyBufSize is the array callers of sortedKeys keep on their stack.
const keyBufSize = 24

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

func appendBinaryHeader(dst []byte, cmd *Command) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(cmd.Code)))
	lang := cmd.Language
	if lang == "" {
		lang = Language
	}
	dst = append(dst, languageCode(lang))
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(cmd.Version)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(cmd.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(cmd.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(cmd.Remark)))
	dst = append(dst, cmd.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if cmd.Header != nil {
		e := getExtEncoder(dst, false)
		cmd.Header.EncodeExt(e)
		dst = e.dst
		putExtEncoder(e)
	} else {
		dst = appendBinaryExt(dst, cmd.ExtFields)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}

// appendBinaryExt writes ext fields in RocketMQ's binary encoding, in key
// order. A function of its own: its key array stays off the stack of
// appendBinaryHeader's callers that never need it.
func appendBinaryExt(dst []byte, ext map[string]string) []byte {
	var keyBuf [keyBufSize]string
	for _, k := range sortedKeys(keyBuf[:0], ext) {
		v := ext[k]
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// readerPool-free helper for tests and tools: DecodeWholeFrame decodes a
// complete frame including its length field.
func DecodeWholeFrame(b []byte) (*Command, error) {
	if len(b) < 4 {
		return nil, &FrameError{Reason: "frame shorter than its length field"}
	}
	n := int(int32(binary.BigEndian.Uint32(b)))
	if n != len(b)-4 {
		return nil, &FrameError{Reason: fmt.Sprintf("length field %d does not match %d bytes", n, len(b)-4)}
	}
	return ReadFrame(bufio.NewReader(bytes.NewReader(b)), math.MaxInt32)
}
