// Package filter compiles and evaluates RocketMQ's SQL92 property filters,
// the expressions a consumer subscribes with when its expression type is
// "SQL92" (rocketmq-client-go's consumer.SQL92, Java's
// MessageSelector.bySql). The broker evaluates them against each message's
// properties when it answers a pull.
//
// # Grammar
//
//	expr       = or
//	or         = and { OR and }
//	and        = equality { AND equality }
//	equality   = comparison { ("=" | "<>") comparison | IS [NOT] NULL }
//	comparison = unary { (">" | ">=" | "<" | "<=") unary
//	                   | [NOT] BETWEEN unary AND unary
//	                   | [NOT] IN "(" string { "," string } ")"
//	                   | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string }
//	unary      = ("+" | "-" | NOT) unary | primary
//	primary    = literal | property | "(" or ")"
//	literal    = string | integer | float | TRUE | FALSE | NULL
//
// Keywords are case-insensitive; property names are case-sensitive and
// spelled [A-Za-z_$][A-Za-z0-9_$]*. A string is quoted with ' and a quote
// inside it is doubled (”). Integers are 64-bit (an optional L suffix is
// accepted), floats are 64-bit and may have an exponent. "--" starts a
// comment to the end of the line, and /* ... */ is a comment.
//
// # Semantics (RocketMQ's, decided when compiling or per message)
//
//   - Every property is a string. Compared with a number literal it is read
//     as that number's type (a long literal reads the property as a 64-bit
//     integer, a float literal as a float); compared with TRUE or FALSE it is
//     true when it spells "true" in any case and false otherwise.
//   - A property that is missing is NULL. A comparison, BETWEEN, IN or
//     CONTAINS with a NULL operand is unknown, and so is NOT unknown; AND
//     and OR follow SQL's three-valued logic. A message matches only when
//     the whole expression is TRUE, so "a <> 'x'" and "a NOT IN ('x')" never
//     match a message without a. IS NULL and IS NOT NULL test for presence.
//   - A type mismatch found while evaluating (a property "abc" read as a
//     number, two properties compared with > that are not both numbers) is
//     an evaluation error: the whole expression fails for that message, and
//     the message does not match, as in RocketMQ.
//   - Mistakes visible in the text are refused when compiling: a string, TRUE,
//     FALSE or a comparison as an operand of > >= < <=; NULL as an operand of
//     = or <>; TRUE/FALSE compared with a number or string literal; BETWEEN
//     bounds that are NULL or in the wrong order; IN on anything but a
//     property; an expression that is not a condition ("5", "'x'").
//   - A bare property used as a condition ("a AND b") is true only when it
//     holds a boolean value, which a string property never does: RocketMQ
//     accepts it and it never matches.
//
// Compiled expressions are immutable and safe for concurrent use. Limits
// (MaxLength, MaxDepth, MaxInItems) keep a hostile expression from costing
// a server more than a small, bounded amount of memory and stack.
package filter
