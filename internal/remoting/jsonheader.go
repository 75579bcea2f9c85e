package remoting

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// errJSONSlowPath tells decodeJSONHeader that the fast decoder cannot vouch
// for its answer and the encoding/json decoder must decide. It never leaves
// the package.
var errJSONSlowPath = errors.New("remoting: JSON header needs the encoding/json decoder")

// jsonSharedBackingMax is the largest header whose strings share one copy of
// the header text. Above it every string is copied on its own, so that a
// retained ext value cannot pin a large header.
const jsonSharedBackingMax = 4096

// jsonMaxDepth bounds the nesting of skipped values. encoding/json allows
// 10000; deeper input goes to it, which decides.
const jsonMaxDepth = 256

// jsonExtInline is how many ext fields are collected without a heap
// allocation before the map is built at its final size.
const jsonExtInline = 24

// Bits of the known header fields, to spot a repeated key.
const (
	seenCode = 1 << iota
	seenLanguage
	seenVersion
	seenOpaque
	seenFlag
	seenRemark
	seenExt
)

// jsonKnownKeys are the jsonHeader field names. encoding/json also matches
// them case-insensitively; such keys go to the slow path.
var jsonKnownKeys = [...]string{"code", "language", "version", "opaque", "flag", "remark", "extFields"}

// jsonScanner walks a JSON header. Any construct it is not certain to read
// exactly as encoding/json does makes it give up with errJSONSlowPath.
type jsonScanner struct {
	b       []byte
	i       int
	backing string // b as a string when strings may alias it, else ""
}

// jsonExtEntry is one ext field in wire order; null marks a JSON null,
// which removes the key (encoding/json keeps the last value of a key, and
// a null last value is dropped).
type jsonExtEntry struct {
	k, v string
	null bool
}

// decodeJSONHeaderFast decodes the common JSON header by hand. It returns
// errJSONSlowPath for anything it cannot decode with certainty — invalid
// input included — so its successes are exactly encoding/json's (proven by
// FuzzJSONHeaderFastMatchesStd) and every error comes from the slow path.
func decodeJSONHeaderFast(b []byte) (*Command, error) {
	s := jsonScanner{b: b}
	if len(b) <= jsonSharedBackingMax {
		s.backing = string(b)
	}
	cmd := &Command{}
	var (
		seen    int
		inline  [jsonExtInline]jsonExtEntry
		entries = inline[:0]
	)
	s.ws()
	if !s.consume('{') {
		return nil, errJSONSlowPath
	}
	s.ws()
	if !s.consume('}') {
		for {
			ks, ke, flags, ok := s.stringRange()
			if !ok || flags != 0 {
				return nil, errJSONSlowPath
			}
			s.ws()
			if !s.consume(':') {
				return nil, errJSONSlowPath
			}
			s.ws()
			var bit int
			switch key := b[ks:ke]; string(key) {
			case "code":
				bit, ok = seenCode, s.int32Value(&cmd.Code)
			case "version":
				bit, ok = seenVersion, s.int32Value(&cmd.Version)
			case "opaque":
				bit, ok = seenOpaque, s.int32Value(&cmd.Opaque)
			case "flag":
				bit, ok = seenFlag, s.int32Value(&cmd.Flag)
			case "language":
				bit, ok = seenLanguage, s.languageValue(cmd)
			case "remark":
				bit, ok = seenRemark, s.remarkValue(cmd)
			case "extFields":
				bit = seenExt
				entries, ok = s.extValue(entries)
			default:
				ok = !foldsToKnownKey(key) && s.skipValue()
			}
			if !ok || seen&bit != 0 {
				return nil, errJSONSlowPath
			}
			seen |= bit
			s.ws()
			if s.consume('}') {
				break
			}
			if !s.consume(',') {
				return nil, errJSONSlowPath
			}
			s.ws()
		}
	}
	s.ws()
	if s.i != len(b) {
		return nil, errJSONSlowPath
	}
	if len(entries) > 0 {
		cmd.ExtFields = make(map[string]string, len(entries))
		for _, e := range entries {
			if e.null {
				delete(cmd.ExtFields, e.k)
			} else {
				cmd.ExtFields[e.k] = e.v
			}
		}
	}
	return cmd, nil
}

// foldsToKnownKey reports whether encoding/json might match key to a header
// field although it is not spelt exactly: an ASCII case variant, or any
// non-ASCII key (Unicode folding maps e.g. U+017F to 's').
func foldsToKnownKey(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	for _, k := range jsonKnownKeys {
		if len(k) == len(key) && asciiEqualFold(k, key) {
			return true
		}
	}
	return false
}

func asciiEqualFold(a string, b []byte) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// literal consumes word (true, false, null).
func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// String flags: what stringText must do beyond slicing.
const (
	strEscaped = 1 << iota // holds a backslash escape
	strHigh                // holds a byte >= 0x80
)

// stringRange validates the string at s.i and returns the range of its
// contents (between the quotes) and what unquoting it involves.
func (s *jsonScanner) stringRange() (start, end, flags int, ok bool) {
	if !s.consume('"') {
		return 0, 0, 0, false
	}
	start = s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			end = s.i
			s.i++
			return start, end, flags, true
		case c < 0x20:
			return 0, 0, 0, false
		case c == '\\':
			flags |= strEscaped
			if s.i+1 >= len(s.b) {
				return 0, 0, 0, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if hex4(s.b[s.i+2:]) < 0 {
					return 0, 0, 0, false
				}
				s.i += 6
			default:
				return 0, 0, 0, false
			}
		case c >= utf8.RuneSelf:
			flags |= strHigh
			s.i++
		default:
			s.i++
		}
	}
	return 0, 0, 0, false
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// text returns b[start:end] as a string, sharing the header's copy when
// there is one.
func (s *jsonScanner) text(start, end int) string {
	if s.backing != "" {
		return s.backing[start:end]
	}
	return string(s.b[start:end])
}

// stringText returns the unquoted contents of a string stringRange
// validated, as encoding/json unquotes them: invalid UTF-8 and unpaired
// surrogates become U+FFFD.
func (s *jsonScanner) stringText(start, end, flags int) string {
	raw := s.b[start:end]
	if flags == 0 || (flags == strHigh && utf8.Valid(raw)) {
		return s.text(start, end)
	}
	out := make([]byte, 0, len(raw)+utf8.UTFMax)
	for r := 0; r < len(raw); {
		c := raw[r]
		switch {
		case c == '\\':
			switch e := raw[r+1]; e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := hex4(raw[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr2 := rune(-1)
					if r+1 < len(raw) && raw[r] == '\\' && raw[r+1] == 'u' {
						rr2 = hex4(raw[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr2); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						r += 6
						continue
					}
					rr = utf8.RuneError
				}
				out = utf8.AppendRune(out, rr)
				continue
			default: // '"', '\\', '/'
				out = append(out, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(raw[r:])
			out = utf8.AppendRune(out, rr)
			r += size
		}
	}
	return string(out)
}

// numberRange validates a JSON number at s.i and reports whether it is a
// plain integer (no fraction or exponent).
func (s *jsonScanner) numberRange() (start, end int, integer, ok bool) {
	start = s.i
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return 0, 0, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, 0, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, 0, false, false
		}
	}
	s.i = i
	return start, i, integer, true
}

// parseInt32 parses text that matches -?(0|[1-9][0-9]*), or fails when it
// is out of range.
func parseInt32(t []byte) (int32, bool) {
	neg := len(t) > 0 && t[0] == '-'
	if neg {
		t = t[1:]
	}
	if len(t) == 0 || len(t) > 10 {
		return 0, false
	}
	var v int64
	for _, c := range t {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, false
	}
	return int32(v), true
}

// int32Value reads a numeric header field: an integer, a string holding
// one (as json.Number allows), or null.
func (s *jsonScanner) int32Value(dst *int32) bool {
	switch c := s.peek(); {
	case c == 'n':
		return s.literal("null")
	case c == '"':
		start, end, flags, ok := s.stringRange()
		if !ok || flags != 0 || end == start || (s.b[start] == '0' && end-start > 1) ||
			(s.b[start] == '-' && (end-start == 1 || (s.b[start+1] == '0' && end-start > 2))) {
			return false
		}
		v, ok := parseInt32(s.b[start:end])
		*dst = v
		return ok
	default:
		start, end, integer, ok := s.numberRange()
		if !ok || !integer {
			return false
		}
		v, ok := parseInt32(s.b[start:end])
		*dst = v
		return ok
	}
}

// languageValue reads language: a string, or a number kept as written.
func (s *jsonScanner) languageValue(cmd *Command) bool {
	if s.peek() == '"' {
		start, end, flags, ok := s.stringRange()
		if ok {
			cmd.Language = s.stringText(start, end, flags)
		}
		return ok
	}
	start, end, _, ok := s.numberRange()
	if ok {
		cmd.Language = s.text(start, end)
	}
	return ok
}

// remarkValue reads remark: a string or null.
func (s *jsonScanner) remarkValue(cmd *Command) bool {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	start, end, flags, ok := s.stringRange()
	if ok {
		cmd.Remark = s.stringText(start, end, flags)
	}
	return ok
}

// extValue reads extFields, null or an object of scalars, appending its
// fields to entries.
func (s *jsonScanner) extValue(entries []jsonExtEntry) ([]jsonExtEntry, bool) {
	if s.peek() == 'n' {
		return entries, s.literal("null")
	}
	if !s.consume('{') {
		return entries, false
	}
	s.ws()
	if s.consume('}') {
		return entries, true
	}
	for {
		ks, ke, kflags, ok := s.stringRange()
		if !ok {
			return entries, false
		}
		s.ws()
		if !s.consume(':') {
			return entries, false
		}
		s.ws()
		e := jsonExtEntry{k: s.stringText(ks, ke, kflags)}
		switch c := s.peek(); {
		case c == '"':
			start, end, flags, ok := s.stringRange()
			if !ok {
				return entries, false
			}
			e.v = s.stringText(start, end, flags)
		case c == 't' || c == 'f':
			start := s.i
			if !s.literal("true") && !s.literal("false") {
				return entries, false
			}
			e.v = s.text(start, s.i)
		case c == 'n':
			if !s.literal("null") {
				return entries, false
			}
			e.null = true
		default:
			// Objects and arrays are an error on the slow path.
			start, end, _, ok := s.numberRange()
			if !ok {
				return entries, false
			}
			e.v = s.text(start, end)
		}
		entries = append(entries, e)
		s.ws()
		if s.consume('}') {
			return entries, true
		}
		if !s.consume(',') {
			return entries, false
		}
		s.ws()
	}
}

// skipValue validates and skips any JSON value, iteratively so that deep
// nesting costs no stack.
func (s *jsonScanner) skipValue() bool {
	// stack holds, per open container, whether it is an object.
	var stack [jsonMaxDepth]bool
	depth := 0
	for {
		// A value is expected here.
		switch c := s.peek(); {
		case c == '"':
			if _, _, _, ok := s.stringRange(); !ok {
				return false
			}
		case c == 't':
			if !s.literal("true") {
				return false
			}
		case c == 'f':
			if !s.literal("false") {
				return false
			}
		case c == 'n':
			if !s.literal("null") {
				return false
			}
		case c == '{' || c == '[':
			if depth == len(stack) {
				return false
			}
			s.i++
			stack[depth] = c == '{'
			depth++
			s.ws()
			closer := byte(']')
			if c == '{' {
				closer = '}'
			}
			if s.consume(closer) {
				depth--
				break
			}
			if c == '{' && !s.objectKey() {
				return false
			}
			continue
		default:
			if _, _, _, ok := s.numberRange(); !ok {
				return false
			}
		}
		// After a value: close containers or move to the next element.
		for {
			if depth == 0 {
				return true
			}
			s.ws()
			obj := stack[depth-1]
			if s.consume(',') {
				s.ws()
				if obj && !s.objectKey() {
					return false
				}
				break
			}
			if (obj && s.consume('}')) || (!obj && s.consume(']')) {
				depth--
				continue
			}
			return false
		}
	}
}

// objectKey skips `"key" :` and the whitespace after it.
func (s *jsonScanner) objectKey() bool {
	if _, _, _, ok := s.stringRange(); !ok {
		return false
	}
	s.ws()
	if !s.consume(':') {
		return false
	}
	s.ws()
	return true
}
