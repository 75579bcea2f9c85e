package acl

import (
	"fmt"
	"strconv"
	"strings"
)

// A reader of the YAML subset plain_acl.yml files use, so the ACL needs no
// dependency: block mappings and block sequences by indentation, plain,
// 'single' and "double" quoted scalars, `#` comments, and the empty flow
// forms [] and {}. Anchors, tags, multi-line scalars, flow collections with
// items and multiple documents are refused with the line number, never
// guessed at.

// yamlLine is one meaningful line: its indentation and its text without the
// comment.
type yamlLine struct {
	number int
	indent int
	text   string
}

// parseYAML returns the document as nested map[string]any, []any and
// string values (nil for an empty value).
func parseYAML(data []byte) (any, error) {
	var lines []yamlLine
	for i, raw := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") {
		if lead := raw[:len(raw)-len(strings.TrimLeft(raw, " \t"))]; strings.Contains(lead, "\t") {
			return nil, fmt.Errorf("line %d: a tab in the indentation (YAML indents with spaces)", i+1)
		}
		text := stripComment(raw)
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || trimmed == "---" {
			continue
		}
		if trimmed == "..." {
			break
		}
		lines = append(lines, yamlLine{number: i + 1, indent: len(text) - len(strings.TrimLeft(text, " ")), text: trimmed})
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := &yamlParser{lines: lines}
	v, err := p.block(lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.lines) {
		return nil, fmt.Errorf("line %d: unexpected indentation", p.lines[p.pos].number)
	}
	return v, nil
}

// stripComment drops a `#` comment that is outside quotes and starts the
// line or follows a space.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimRight(s[:i], " ")
		}
	}
	return strings.TrimRight(s, " ")
}

type yamlParser struct {
	lines []yamlLine
	pos   int
}

// block reads the mapping or sequence whose lines start at indent.
func (p *yamlParser) block(indent int) (any, error) {
	l := p.lines[p.pos]
	if l.indent != indent {
		return nil, fmt.Errorf("line %d: unexpected indentation", l.number)
	}
	if isSeqItem(l.text) {
		return p.sequence(indent)
	}
	return p.mapping(indent, nil)
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// sequence reads "- item" lines at indent.
func (p *yamlParser) sequence(indent int) ([]any, error) {
	out := []any{}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent < indent {
			break
		}
		if l.indent > indent || !isSeqItem(l.text) {
			return nil, fmt.Errorf("line %d: expected a \"- \" item at column %d", l.number, indent+1)
		}
		rest := strings.TrimSpace(strings.TrimPrefix(l.text, "-"))
		p.pos++
		switch {
		case rest == "":
			// The item is the nested block below, or empty.
			if p.pos < len(p.lines) && p.lines[p.pos].indent > indent {
				v, err := p.block(p.lines[p.pos].indent)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			} else {
				out = append(out, nil)
			}
		case isMappingEntry(rest):
			// "- key: value" starts a mapping whose further keys line up
			// with "key".
			itemIndent := indent + (len(l.text) - len(strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")))
			first := yamlLine{number: l.number, indent: itemIndent, text: rest}
			m, err := p.mapping(itemIndent, &first)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		default:
			v, err := scalar(rest, l.number)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// isMappingEntry reports whether text is "key:" or "key: value" with the
// key outside quotes.
func isMappingEntry(text string) bool {
	_, _, ok := splitKey(text)
	return ok
}

// splitKey splits "key: value" (or "key:"); the key may be quoted.
func splitKey(text string) (key, value string, ok bool) {
	if text == "" || text[0] == '\'' || text[0] == '"' {
		if text == "" {
			return "", "", false
		}
		end := strings.IndexByte(text[1:], text[0])
		if end < 0 {
			return "", "", false
		}
		rest := text[end+2:]
		if rest != ":" && !strings.HasPrefix(rest, ": ") {
			return "", "", false
		}
		return text[1 : end+1], strings.TrimSpace(rest[1:]), true
	}
	if i := strings.Index(text, ": "); i > 0 {
		return strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+2:]), true
	}
	if strings.HasSuffix(text, ":") && len(text) > 1 {
		return strings.TrimSpace(text[:len(text)-1]), "", true
	}
	return "", "", false
}

// mapping reads "key: value" lines at indent; first, when set, is its
// first line (taken from a "- key: value" item).
func (p *yamlParser) mapping(indent int, first *yamlLine) (map[string]any, error) {
	out := map[string]any{}
	for {
		var l yamlLine
		if first != nil {
			l, first = *first, nil
		} else {
			if p.pos >= len(p.lines) || p.lines[p.pos].indent < indent {
				return out, nil
			}
			l = p.lines[p.pos]
			if l.indent > indent {
				return nil, fmt.Errorf("line %d: unexpected indentation", l.number)
			}
			if isSeqItem(l.text) {
				return out, nil // a sibling item of the enclosing sequence
			}
			p.pos++
		}
		key, value, ok := splitKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: expected \"key: value\", got %q", l.number, l.text)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("line %d: key %q appears twice", l.number, key)
		}
		if value != "" {
			v, err := scalar(value, l.number)
			if err != nil {
				return nil, err
			}
			out[key] = v
			continue
		}
		// A nested block: deeper lines, or a sequence at the same indent
		// (YAML allows "key:\n- item").
		if p.pos < len(p.lines) {
			next := p.lines[p.pos]
			if next.indent > indent || (next.indent == indent && isSeqItem(next.text)) {
				v, err := p.block(next.indent)
				if err != nil {
					return nil, err
				}
				out[key] = v
				continue
			}
		}
		out[key] = nil
	}
}

// scalar reads a one-line value.
func scalar(s string, line int) (any, error) {
	switch {
	case s == "[]":
		return []any{}, nil
	case s == "{}":
		return map[string]any{}, nil
	case s[0] == '"':
		v, err := strconv.Unquote(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: bad double-quoted string %s", line, s)
		}
		return v, nil
	case s[0] == '\'':
		if len(s) < 2 || s[len(s)-1] != '\'' {
			return nil, fmt.Errorf("line %d: unterminated single-quoted string %s", line, s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case strings.ContainsAny(s[:1], "[{&*!|>%@`"):
		return nil, fmt.Errorf("line %d: %q uses YAML this reader does not support (flow collections, anchors, tags, block scalars); quote the value", line, s)
	case s == "~" || s == "null":
		return nil, nil
	}
	return s, nil
}
