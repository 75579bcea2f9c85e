package filter

import "fmt"

// Limits on one expression. They bound the parser's recursion and the
// memory a compiled expression holds; RocketMQ has none, and real filters
// are far below them.
const (
	// MaxLength is the longest expression accepted, in bytes.
	MaxLength = 16 << 10
	// MaxDepth is the deepest nesting of parentheses and unary operators.
	MaxDepth = 64
	// MaxInItems is the most strings one IN list may hold.
	MaxInItems = 1024
)

// Expression is a compiled SQL92 filter. It is immutable and safe for
// concurrent use.
type Expression struct {
	src  string
	root node
}

// String returns the source the expression was compiled from.
func (e *Expression) String() string { return e.src }

// Match reports whether a message with these properties passes the filter:
// the expression must be TRUE. Unknown (a missing property) and evaluation
// errors (a property of the wrong type) do not match.
func (e *Expression) Match(p Properties) bool {
	v, err := e.root.eval(p)
	return err == nil && v.k == kBool && v.b
}

// Evaluate is Match that also tells why a message does not match: the
// result is nil for unknown, and err wraps an evaluation error.
func (e *Expression) Evaluate(p Properties) (*bool, error) {
	v, err := e.root.eval(p)
	if err != nil || v.k != kBool {
		return nil, err
	}
	return &v.b, nil
}

// MapProperties adapts a map to Properties.
func MapProperties(m map[string]string) Properties {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// Parse compiles src. A refused expression is a *SyntaxError that names the
// mistake and where it is.
func Parse(src string) (*Expression, error) {
	if len(src) > MaxLength {
		return nil, &SyntaxError{Offset: MaxLength, Msg: fmt.Sprintf("the expression is %d bytes; the limit is %d", len(src), MaxLength)}
	}
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, &SyntaxError{Offset: 0, Msg: "the expression is empty"}
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.unexpected("the end of the expression")
	}
	root, err := p.condition(n, 0)
	if err != nil {
		return nil, err
	}
	return &Expression{src: src, root: root}, nil
}

// parser is a recursive-descent parser with one token of look-ahead.
type parser struct {
	lex   lexer
	tok   token
	depth int
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errorf(pos int, format string, a ...any) error {
	return &SyntaxError{Offset: pos, Msg: fmt.Sprintf(format, a...)}
}

func (p *parser) unexpected(want string) error {
	got := p.tok.text
	switch p.tok.kind {
	case tokEOF:
		got = "the end"
	case tokString:
		got = "'" + got + "'"
	}
	return p.errorf(p.tok.pos, "expected %s, found %s", want, got)
}

func (p *parser) isKeyword(word string) bool { return p.tok.kind == tokKeyword && p.tok.text == word }

func (p *parser) isSymbol(sym string) bool { return p.tok.kind == tokSymbol && p.tok.text == sym }

// peekKeyword reports whether the token after the current one is word,
// without consuming anything (NOT BETWEEN / NOT IN / NOT CONTAINS).
func (p *parser) peekKeyword(word string) bool {
	save := p.lex
	t, err := p.lex.next()
	p.lex = save
	return err == nil && t.kind == tokKeyword && t.text == word
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf(p.tok.pos, "nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (p *parser) or() (node, error) {
	l, err := p.and()
	for err == nil && p.isKeyword("OR") {
		pos := p.tok.pos
		if err = p.advance(); err != nil {
			break
		}
		var r node
		if r, err = p.and(); err != nil {
			break
		}
		l, err = p.logic(false, l, r, pos)
	}
	return l, err
}

func (p *parser) and() (node, error) {
	l, err := p.equality()
	for err == nil && p.isKeyword("AND") {
		pos := p.tok.pos
		if err = p.advance(); err != nil {
			break
		}
		var r node
		if r, err = p.equality(); err != nil {
			break
		}
		l, err = p.logic(true, l, r, pos)
	}
	return l, err
}

func (p *parser) logic(and bool, l, r node, pos int) (node, error) {
	l, err := p.condition(l, pos)
	if err != nil {
		return nil, err
	}
	if r, err = p.condition(r, pos); err != nil {
		return nil, err
	}
	return logic{and: and, l: l, r: r}, nil
}

func (p *parser) equality() (node, error) {
	l, err := p.comparison()
	for err == nil {
		pos := p.tok.pos
		switch {
		case p.isSymbol("=") || p.isSymbol("<>"):
			op := opEq
			if p.tok.text == "<>" {
				op = opNe
			}
			if err = p.advance(); err != nil {
				return nil, err
			}
			var r node
			if r, err = p.comparison(); err != nil {
				return nil, err
			}
			if err = p.checkEqualOperands(l, r, pos); err != nil {
				return nil, err
			}
			l = comparison{op: op, l: l, r: r}
		case p.isKeyword("IS"):
			if err = p.advance(); err != nil {
				return nil, err
			}
			negated := p.isKeyword("NOT")
			if negated {
				if err = p.advance(); err != nil {
					return nil, err
				}
			}
			if !p.isKeyword("NULL") {
				return nil, p.unexpected("NULL")
			}
			if err = p.advance(); err != nil {
				return nil, err
			}
			l = isNull{x: l, not: negated}
		default:
			return l, nil
		}
	}
	return l, err
}

func (p *parser) comparison() (node, error) {
	l, err := p.unary()
	for err == nil {
		pos := p.tok.pos
		switch {
		case p.isSymbol(">") || p.isSymbol(">=") || p.isSymbol("<") || p.isSymbol("<="):
			op := map[string]compareOp{">": opGt, ">=": opGe, "<": opLt, "<=": opLe}[p.tok.text]
			if err = p.advance(); err != nil {
				return nil, err
			}
			var r node
			if r, err = p.unary(); err != nil {
				return nil, err
			}
			if err = p.checkOrderedOperands(pos, l, r); err != nil {
				return nil, err
			}
			l = comparison{op: op, l: l, r: r}
		case p.isKeyword("BETWEEN"):
			l, err = p.between(l, false)
		case p.isKeyword("IN"):
			l, err = p.in(l, false)
		case p.isKeyword("CONTAINS") || p.isKeyword("STARTSWITH") || p.isKeyword("ENDSWITH"):
			l, err = p.stringTest(l, false)
		case p.isKeyword("NOT") && (p.peekKeyword("BETWEEN") || p.peekKeyword("IN") ||
			p.peekKeyword("CONTAINS") || p.peekKeyword("STARTSWITH") || p.peekKeyword("ENDSWITH")):
			if err = p.advance(); err != nil {
				return nil, err
			}
			switch {
			case p.isKeyword("BETWEEN"):
				l, err = p.between(l, true)
			case p.isKeyword("IN"):
				l, err = p.in(l, true)
			default:
				l, err = p.stringTest(l, true)
			}
		default:
			return l, nil
		}
	}
	return l, err
}

// between parses "BETWEEN lo AND hi" after x; the current token is BETWEEN.
func (p *parser) between(x node, negated bool) (node, error) {
	pos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	lo, err := p.unary()
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("AND") {
		return nil, p.unexpected("AND")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	hi, err := p.unary()
	if err != nil {
		return nil, err
	}
	if err := p.checkOrderedOperands(pos, x, lo, hi); err != nil {
		return nil, err
	}
	if l, ok := constant(lo); ok {
		if h, ok := constant(hi); ok {
			if c, ok, _ := compareValues(l, h); ok && c > 0 {
				return nil, p.errorf(pos, "BETWEEN bounds are in the wrong order: the low bound must not exceed the high one")
			}
		}
	}
	if negated {
		return logic{and: false, l: comparison{op: opLt, l: x, r: lo}, r: comparison{op: opGt, l: x, r: hi}}, nil
	}
	return logic{and: true, l: comparison{op: opGe, l: x, r: lo}, r: comparison{op: opLe, l: x, r: hi}}, nil
}

// in parses "IN ('a', 'b')" after x; the current token is IN.
func (p *parser) in(x node, negated bool) (node, error) {
	pos := p.tok.pos
	prop, ok := x.(property)
	if !ok {
		return nil, p.errorf(pos, "IN applies to a property only")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if !p.isSymbol("(") {
		return nil, p.unexpected("(")
	}
	set := map[string]struct{}{}
	for items := 0; ; items++ {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tokString {
			return nil, p.unexpected("a string")
		}
		if items >= MaxInItems {
			return nil, p.errorf(p.tok.pos, "an IN list holds at most %d strings", MaxInItems)
		}
		set[p.tok.text] = struct{}{}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.isSymbol(")") {
			break
		}
		if !p.isSymbol(",") {
			return nil, p.unexpected(", or )")
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return inList{x: prop, set: set, not: negated}, nil
}

// stringTest parses "CONTAINS 'x'" (or STARTSWITH, ENDSWITH) after x.
func (p *parser) stringTest(x node, negated bool) (node, error) {
	op := map[string]stringOp{"CONTAINS": opContains, "STARTSWITH": opStartsWith, "ENDSWITH": opEndsWith}[p.tok.text]
	word, pos := p.tok.text, p.tok.pos
	if _, isConst := constant(x); isConst || isCondition(x) {
		return nil, p.errorf(pos, "%s applies to a property only", word)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokString {
		return nil, p.unexpected("a string after " + word)
	}
	arg := p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	return stringTest{op: op, x: x, arg: arg, not: negated}, nil
}

func (p *parser) unary() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	pos := p.tok.pos
	switch {
	case p.isSymbol("+") || p.isSymbol("-"):
		minus := p.tok.text == "-"
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if v, ok := constant(x); ok && v.k != kLong && v.k != kDouble {
			return nil, p.errorf(pos, "a sign applies to numbers only")
		}
		if isCondition(x) {
			return nil, p.errorf(pos, "a sign applies to numbers only")
		}
		if !minus {
			return x, nil
		}
		if v, ok := constant(x); ok {
			neg, _ := negate{x: literal{v}}.eval(nil)
			return literal{neg}, nil
		}
		return negate{x: x}, nil
	case p.isKeyword("NOT"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		c, err := p.condition(x, pos)
		if err != nil {
			return nil, err
		}
		return not{x: c}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.tok
	var n node
	switch t.kind {
	case tokString:
		n = literal{value{k: kString, s: t.text}}
	case tokInt:
		n = literal{value{k: kLong, i: t.i}}
	case tokFloat:
		n = literal{value{k: kDouble, f: t.f}}
	case tokIdent:
		n = property{name: t.text}
	case tokKeyword:
		switch t.text {
		case "TRUE":
			n = literal{trueValue}
		case "FALSE":
			n = literal{falseVal}
		case "NULL":
			n = literal{null}
		default:
			return nil, p.unexpected("a value")
		}
	case tokSymbol:
		if t.text != "(" {
			return nil, p.unexpected("a value")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.isSymbol(")") {
			return nil, p.unexpected(")")
		}
		return x, p.advance()
	default:
		return nil, p.unexpected("a value")
	}
	return n, p.advance()
}

// constant returns the value of a literal.
func constant(n node) (value, bool) {
	l, ok := n.(literal)
	return l.v, ok
}

// isCondition reports whether n yields a boolean (TRUE/FALSE literals and
// every comparison or logical operator).
func isCondition(n node) bool {
	switch x := n.(type) {
	case literal:
		return x.v.k == kBool
	case comparison, isNull, inList, stringTest, logic, not, boolCast:
		return true
	}
	return false
}

// condition turns n into a condition: itself when it yields a boolean, a
// boolean cast for a property; anything else is refused.
func (p *parser) condition(n node, pos int) (node, error) {
	switch {
	case isCondition(n):
		return n, nil
	case isProperty(n):
		return boolCast{x: n}, nil
	}
	return nil, p.errorf(pos, "the expression is not a condition (a comparison, IN, IS NULL, TRUE or FALSE)")
}

func isProperty(n node) bool {
	_, ok := n.(property)
	return ok
}

// checkOrderedOperands refuses what > >= < <= and BETWEEN cannot order:
// string, boolean and NULL literals, and conditions.
func (p *parser) checkOrderedOperands(pos int, ns ...node) error {
	for _, n := range ns {
		if v, ok := constant(n); ok && v.k != kLong && v.k != kDouble {
			return p.errorf(pos, "only numbers can be ordered; %s is a %s", describe(v), v.k)
		}
		if isCondition(n) {
			return p.errorf(pos, "only numbers can be ordered, not a condition")
		}
	}
	return nil
}

// checkEqualOperands refuses NULL as an operand of = or <> (IS NULL is
// the test for it) and TRUE/FALSE compared with another kind of literal.
func (p *parser) checkEqualOperands(l, r node, pos int) error {
	lv, lc := constant(l)
	rv, rc := constant(r)
	if lc && lv.k == kNull || rc && rv.k == kNull {
		return p.errorf(pos, "NULL cannot be compared with = or <>; use IS NULL")
	}
	if lc && rc && (lv.k == kBool) != (rv.k == kBool) {
		return p.errorf(pos, "%s cannot be compared with %s", describe(lv), describe(rv))
	}
	return nil
}

func describe(v value) string {
	switch v.k {
	case kBool:
		if v.b {
			return "TRUE"
		}
		return "FALSE"
	case kLong:
		return fmt.Sprint(v.i)
	case kDouble:
		return fmt.Sprint(v.f)
	case kString:
		return "'" + v.s + "'"
	}
	return "NULL"
}
