package filter

import "strings"

// Properties looks a message property up by name.
type Properties func(name string) (string, bool)

// node is one compiled sub-expression.
type node interface {
	eval(p Properties) (value, error)
}

// literal is a constant.
type literal struct{ v value }

func (n literal) eval(Properties) (value, error) { return n.v, nil }

// property is a message property: a string, or NULL when missing.
type property struct{ name string }

func (n property) eval(p Properties) (value, error) {
	if s, ok := p(n.name); ok {
		return value{k: kString, s: s}, nil
	}
	return null, nil
}

// negate is unary minus. Applied to a property (a string) it is NULL, as
// RocketMQ negates numbers only.
type negate struct{ x node }

func (n negate) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil {
		return null, err
	}
	switch v.k {
	case kLong:
		return value{k: kLong, i: -v.i}, nil
	case kDouble:
		return value{k: kDouble, f: -v.f}, nil
	}
	return null, nil
}

// compareOp is one of = <> > >= < <=.
type compareOp uint8

const (
	opEq compareOp = iota
	opNe
	opGt
	opGe
	opLt
	opLe
)

// comparison compares two operands; a NULL operand makes it unknown.
type comparison struct {
	op   compareOp
	l, r node
}

func (n comparison) eval(p Properties) (value, error) {
	l, err := n.l.eval(p)
	if err != nil || l.k == kNull {
		return null, err
	}
	r, err := n.r.eval(p)
	if err != nil || r.k == kNull {
		return null, err
	}
	if n.op >= opGt && l.k == kString && r.k == kString {
		// Only numbers are ordered: two properties (or a property and a
		// string it was converted against) must both read as numbers.
		if l, err = convertString(l.s, kDouble); err != nil {
			return null, err
		}
		if r, err = convertString(r.s, kDouble); err != nil {
			return null, err
		}
	}
	c, ok, err := compareValues(l, r)
	if err != nil {
		return null, err
	}
	switch n.op {
	case opEq:
		return boolValue(ok && c == 0), nil
	case opNe:
		return boolValue(!ok || c != 0), nil
	case opGt:
		return boolValue(ok && c > 0), nil
	case opGe:
		return boolValue(ok && c >= 0), nil
	case opLt:
		return boolValue(ok && c < 0), nil
	}
	return boolValue(ok && c <= 0), nil
}

// isNull is IS NULL (or IS NOT NULL when not is set): never unknown.
type isNull struct {
	x   node
	not bool
}

func (n isNull) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil {
		return null, err
	}
	return boolValue((v.k == kNull) != n.not), nil
}

// inList is IN / NOT IN on a property against string literals.
type inList struct {
	x   property
	set map[string]struct{}
	not bool
}

func (n inList) eval(p Properties) (value, error) {
	s, ok := p(n.x.name)
	if !ok {
		return null, nil
	}
	_, found := n.set[s]
	return boolValue(found != n.not), nil
}

// stringOp is CONTAINS, STARTSWITH or ENDSWITH.
type stringOp uint8

const (
	opContains stringOp = iota
	opStartsWith
	opEndsWith
)

// stringTest tests a property against a string literal.
type stringTest struct {
	op  stringOp
	x   node
	arg string
	not bool
}

func (n stringTest) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil || v.k == kNull {
		return null, err
	}
	if v.k != kString {
		return null, evalErrorf("%s is not a string", v.k)
	}
	var r bool
	switch n.op {
	case opContains:
		r = strings.Contains(v.s, n.arg)
	case opStartsWith:
		r = strings.HasPrefix(v.s, n.arg)
	default:
		r = strings.HasSuffix(v.s, n.arg)
	}
	return boolValue(r != n.not), nil
}

// logic is AND or OR in three-valued logic; the right side is skipped when
// the left decides.
type logic struct {
	and  bool
	l, r node
}

func (n logic) eval(p Properties) (value, error) {
	l, err := n.l.eval(p)
	if err != nil {
		return null, err
	}
	if l.k == kBool && l.b != n.and {
		return l, nil // FALSE AND …, TRUE OR …
	}
	r, err := n.r.eval(p)
	if err != nil {
		return null, err
	}
	if r.k == kBool && r.b != n.and {
		return r, nil
	}
	if l.k != kBool || r.k != kBool {
		return null, nil
	}
	return boolValue(n.and), nil
}

// not is NOT: unknown stays unknown.
type not struct{ x node }

func (n not) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil || v.k != kBool {
		return null, err
	}
	return boolValue(!v.b), nil
}

// boolCast uses a property as a condition: true only when its value is a
// boolean, which a string property never is (RocketMQ's rule).
type boolCast struct{ x node }

func (n boolCast) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil || v.k == kNull {
		return null, err
	}
	if v.k == kBool {
		return v, nil
	}
	return falseVal, nil
}
