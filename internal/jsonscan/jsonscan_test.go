package jsonscan

import (
	"encoding/json"
	"testing"
)

// Entries counts the top-level members of an object or elements of an
// array, whatever the strings and nested values hold.
func TestJSONEntries(t *testing.T) {
	for _, in := range []string{
		`{}`, ` [ ] `, `null`, `"a,b"`, `{"a":"s"}`,
		`{"a,b":"s,t", "c\"d,":"\\", "e":{"f":1,"g":[1,2,3]}}`,
		`[1, "x", [2, 3], {"a": [4, 5]}, null, true]`, `[[]]`, `[{}, {}]`,
	} {
		var v any
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			t.Fatalf("%s: not JSON: %v", in, err)
		}
		want := 0
		switch v := v.(type) {
		case map[string]any:
			want = len(v)
		case []any:
			want = len(v)
		}
		if got := Entries([]byte(in)); got != want {
			t.Errorf("%s: %d entries, want %d (as encoding/json decodes it)", in, got, want)
		}
	}
}
