// Package jsonscan counts what a JSON document holds without decoding it,
// so that a reader can refuse too many entries before allocating them.
package jsonscan

// Entries returns the members of the JSON object, or the elements of the
// JSON array, data: the commas at its top level, plus one when it is not
// empty. It allocates nothing. data must be valid JSON (as encoding/json
// hands it to an Unmarshaler); a scalar has 0.
func Entries(data []byte) int {
	depth, n := 0, 0
	str, esc, some := false, false, false
	for _, c := range data {
		if str {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				str = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			str = true
		case '{', '[':
			depth++
			if depth == 1 {
				continue // the outer bracket
			}
		case '}', ']':
			depth--
			continue
		case ',':
			if depth == 1 {
				n++
			}
		}
		if depth >= 1 {
			some = true
		}
	}
	if some {
		n++
	}
	return n
}
