package filter

import (
	"fmt"
	"strconv"
	"strings"
)

// tokenKind says what a token is.
type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokString
	tokInt
	tokFloat
	tokKeyword // NOT, AND, OR, … (text holds the upper-case word)
	tokSymbol  // = <> > >= < <= ( ) , + -
)

// token is one lexeme with its byte offset in the source, for errors.
type token struct {
	kind tokenKind
	text string  // identifier, decoded string, keyword (upper case) or symbol
	i    int64   // tokInt
	f    float64 // tokFloat
	pos  int
}

// keywords are the reserved words; anything else that looks like a word is
// a property name.
var keywords = map[string]bool{
	"NOT": true, "AND": true, "OR": true, "BETWEEN": true, "IN": true, "TRUE": true, "FALSE": true,
	"NULL": true, "IS": true, "CONTAINS": true, "STARTSWITH": true, "ENDSWITH": true,
}

// lexer turns the source into tokens on demand.
type lexer struct {
	src string
	pos int
}

// SyntaxError is a refused expression: what is wrong and the byte offset in
// the expression where it was found.
type SyntaxError struct {
	Offset int
	Msg    string
}

// Error reports the message with its position.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("SQL92 filter: %s at offset %d", e.Msg, e.Offset)
}

func (l *lexer) errorf(pos int, format string, a ...any) error {
	return &SyntaxError{Offset: pos, Msg: fmt.Sprintf(format, a...)}
}

// skipSpace skips white space and comments.
func (l *lexer) skipSpace() error {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.pos++
		case strings.HasPrefix(l.src[l.pos:], "--"):
			end := strings.IndexAny(l.src[l.pos:], "\r\n")
			if end < 0 {
				l.pos = len(l.src)
			} else {
				l.pos += end + 1
			}
		case strings.HasPrefix(l.src[l.pos:], "/*"):
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				return l.errorf(l.pos, "unterminated comment")
			}
			l.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// next returns the next token.
func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case isIdentStart(c):
		for l.pos < len(l.src) && isIdentPart(l.src[l.pos]) {
			l.pos++
		}
		word := l.src[start:l.pos]
		if up := strings.ToUpper(word); keywords[up] {
			return token{kind: tokKeyword, text: up, pos: start}, nil
		}
		return token{kind: tokIdent, text: word, pos: start}, nil
	case c == '\'':
		return l.stringLiteral()
	case isDigit(c) || c == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]):
		return l.number()
	}
	for _, sym := range []string{"<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-"} {
		if strings.HasPrefix(l.src[l.pos:], sym) {
			l.pos += len(sym)
			return token{kind: tokSymbol, text: sym, pos: start}, nil
		}
	}
	return token{}, l.errorf(start, "unexpected character %q", rune(c))
}

// stringLiteral reads '...' with ” standing for one quote.
func (l *lexer) stringLiteral() (token, error) {
	start := l.pos
	l.pos++ // the opening quote
	var b strings.Builder
	for {
		i := strings.IndexByte(l.src[l.pos:], '\'')
		if i < 0 {
			return token{}, l.errorf(start, "unterminated string")
		}
		b.WriteString(l.src[l.pos : l.pos+i])
		l.pos += i + 1
		if l.pos < len(l.src) && l.src[l.pos] == '\'' {
			b.WriteByte('\'')
			l.pos++
			continue
		}
		return token{kind: tokString, text: b.String(), pos: start}, nil
	}
}

// number reads an integer (optionally suffixed L) or a float
// (digits with a point and/or an exponent).
func (l *lexer) number() (token, error) {
	start := l.pos
	for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
		l.pos++
	}
	float := false
	if l.pos < len(l.src) && l.src[l.pos] == '.' {
		float = true
		l.pos++
		for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		j := l.pos + 1
		if j < len(l.src) && (l.src[j] == '+' || l.src[j] == '-') {
			j++
		}
		if j < len(l.src) && isDigit(l.src[j]) {
			float = true
			for j < len(l.src) && isDigit(l.src[j]) {
				j++
			}
			l.pos = j
		}
	}
	text := l.src[start:l.pos]
	if float {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return token{}, l.errorf(start, "bad number %q", text)
		}
		return token{kind: tokFloat, f: f, text: text, pos: start}, nil
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'l' || l.src[l.pos] == 'L') {
		l.pos++
	}
	i, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{}, l.errorf(start, "integer %s does not fit in 64 bits", text)
	}
	if l.pos < len(l.src) && isIdentPart(l.src[l.pos]) {
		return token{}, l.errorf(start, "bad number %q", l.src[start:l.pos+1])
	}
	return token{kind: tokInt, i: i, text: text, pos: start}, nil
}
