package filter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// kind is the type of a value during evaluation.
type kind uint8

const (
	kNull kind = iota
	kBool
	kLong
	kDouble
	kString
)

func (k kind) String() string {
	return [...]string{"NULL", "boolean", "long", "double", "string"}[k]
}

// value is one operand: a literal, a property (always a string) or the
// result of a sub-expression (a boolean, or NULL for unknown).
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	null      = value{}
	trueValue = value{k: kBool, b: true}
	falseVal  = value{k: kBool}
)

func boolValue(b bool) value {
	if b {
		return trueValue
	}
	return falseVal
}

// errEval marks an evaluation error: a type mismatch found only when a
// message's properties are known. The message then does not match.
var errEval = errors.New("SQL92 filter: evaluation error")

func evalErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errEval, fmt.Sprintf(format, a...))
}

// compareValues orders two non-NULL values after RocketMQ's conversions:
// long and double meet as double; a string meets a number as that
// number's type and a boolean as "true"/anything else. ok is false when the
// two can only be unequal (a boolean and a number). A string that does not
// read as the other side's number is an evaluation error.
func compareValues(l, r value) (cmp int, ok bool, err error) {
	if l.k != r.k {
		if l, r, ok, err = unify(l, r); !ok || err != nil {
			return 0, ok, err
		}
	}
	switch l.k {
	case kBool:
		return boolCompare(l.b, r.b), true, nil
	case kLong:
		return cmpOrdered(l.i, r.i), true, nil
	case kDouble:
		if l.f != l.f || r.f != r.f {
			return 0, false, nil // NaN is neither equal to nor ordered with anything
		}
		return cmpOrdered(l.f, r.f), true, nil
	case kString:
		return strings.Compare(l.s, r.s), true, nil
	}
	return 0, false, nil
}

// unify converts two values of different kinds to one kind.
func unify(l, r value) (value, value, bool, error) {
	switch {
	case l.k == kLong && r.k == kDouble:
		return value{k: kDouble, f: float64(l.i)}, r, true, nil
	case l.k == kDouble && r.k == kLong:
		return l, value{k: kDouble, f: float64(r.i)}, true, nil
	case l.k == kString && r.k != kString:
		c, err := convertString(l.s, r.k)
		return c, r, err == nil, err
	case r.k == kString && l.k != kString:
		c, err := convertString(r.s, l.k)
		return l, c, err == nil, err
	}
	return l, r, false, nil // boolean against a number: never equal
}

// convertString reads a property as kind k.
func convertString(s string, k kind) (value, error) {
	switch k {
	case kBool:
		return boolValue(strings.EqualFold(s, "true")), nil
	case kLong:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return null, evalErrorf("%q is not a long", s)
		}
		return value{k: kLong, i: i}, nil
	case kDouble:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return null, evalErrorf("%q is not a number", s)
		}
		return value{k: kDouble, f: f}, nil
	}
	return null, evalErrorf("cannot read %q as %s", s, k)
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
