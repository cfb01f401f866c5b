package jsonscan

// MaxDepth bounds the nesting every reader here accepts (the arguments object itself
// is level 1). It is one tenth of encoding/json's own limit on purpose: what toolfleet
// accepts is wrapped again — arguments in a call event, an output in a result, both in
// a run's conversation — and whatever it accepts must still be answered and decoded by
// every reader. It is also the MCP Go SDK's bound on a message's nesting.
const MaxDepth = 1000

// Depth returns how deeply b nests objects and arrays (a flat object is 1, a scalar
// 0), without checking the rest of its syntax. It costs one pass over b and no
// allocation.
func Depth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}
