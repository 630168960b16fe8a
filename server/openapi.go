package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/roformer-go/roformer/pipeline"
)

// GET /docs (and GET /api-doc/openapi.json, where TEI serves it) answer an
// OpenAPI 3.0 document of the routes that answer for the loaded model, made
// from the route table: each route's method, path and summary, and JSON
// Schemas of its request and answer built from their Go types by
// reflection. No page renders it (no Swagger UI: the server carries no
// external scripts); any OpenAPI viewer, or a client generator, reads it.
//
// The schemas follow encoding/json: the exported fields of a struct, named
// by their json tags ("-" skipped, embedded structs inlined); a field is
// required unless its tag says omitempty or omitzero, or it is a pointer; a
// pointer is nullable, a slice or an array is an array ([N]T has N items), a
// map an object of its values, json.RawMessage and interfaces any value. A
// named struct is a component (#/components/schemas/Name); a type that JSON
// reads in other shapes too (Inputs, a string or objects) says so with its
// own openAPISchema method.

// ty is the type T, for the route table's req and resp.
func ty[T any]() reflect.Type { return reflect.TypeFor[T]() }

// The answers that their handlers write as untyped values.
var (
	tokenizeAnswer = ty[struct {
		Results []TokenizeResult `json:"results"`
	}]()
	// one question's best answer (a list of answers with top_k > 1), or a
	// list of those for a list of questions (qa.go)
	qaAnswer = ty[oneOf[oneOf[pipeline.QAAnswer, []pipeline.QAAnswer], []oneOf[pipeline.QAAnswer, []pipeline.QAAnswer]]]()
)

// schemaer is a type that gives its own schema, where reflection on its Go
// type would not say what JSON it reads or writes.
type schemaer interface {
	openAPISchema(g *schemaGen) map[string]any
}

// oneOf is the answer of a route that writes either A or B (one input or a
// batch): its schema is oneOf the two. It is never made; only its type is.
type oneOf[A, B any] struct{}

func (oneOf[A, B]) openAPISchema(g *schemaGen) map[string]any {
	return map[string]any{"oneOf": []any{g.schema(reflect.TypeFor[A]()), g.schema(reflect.TypeFor[B]())}}
}

// openAPISchema: "inputs" is a string, {"text", "text_pair"}, or an array of
// either (Inputs.UnmarshalJSON).
func (Inputs) openAPISchema(g *schemaGen) map[string]any {
	one := map[string]any{"oneOf": []any{map[string]any{"type": "string"}, g.schema(reflect.TypeFor[Input]())}}
	return map[string]any{"oneOf": []any{one, map[string]any{"type": "array", "items": one}}}
}

// schemaGen builds the schemas of one document; named structs go to
// components, each once.
type schemaGen struct {
	components map[string]any
	names      map[reflect.Type]string
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	schemaerType   = reflect.TypeFor[schemaer]()
)

// schema is the JSON Schema of values of type t.
func (g *schemaGen) schema(t reflect.Type) map[string]any {
	if t == rawMessageType {
		return map[string]any{}
	}
	if t.Implements(schemaerType) {
		return reflect.Zero(t).Interface().(schemaer).openAPISchema(g)
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := g.schema(t.Elem())
		if _, ok := s["$ref"]; ok { // 3.0: no siblings beside $ref
			return map[string]any{"allOf": []any{s}, "nullable": true}
		}
		s["nullable"] = true
		return s
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem()), "minItems": t.Len(), "maxItems": t.Len()}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name, ok := g.names[t]
		if !ok {
			name = t.Name()
			for _, taken := g.components[name]; taken; _, taken = g.components[name] {
				name += "_"
			}
			g.names[t] = name
			g.components[name] = nil // taken before its fields, for a type that holds itself
			g.components[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{} // an interface: any value
}

// jsonField is a struct field as encoding/json names it: its name, and
// whether it may be left out.
type jsonField struct {
	name     string
	optional bool
	field    reflect.StructField
}

// jsonFields are the fields of struct t that encoding/json reads and
// writes, those of embedded structs inlined.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" || len(f.Index) > 1 && !visibleAt(t, f) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			continue // inlined: its fields are visible fields too
		}
		if name == "" {
			name = f.Name
		}
		optional := f.Type.Kind() == reflect.Pointer
		for _, o := range strings.Split(opts, ",") {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		out = append(out, jsonField{name: name, optional: optional, field: f})
	}
	return out
}

// visibleAt says whether the promoted field f of t comes through embedded
// structs that encoding/json inlines (untagged, exported or struct-typed).
func visibleAt(t reflect.Type, f reflect.StructField) bool {
	for _, i := range f.Index[:len(f.Index)-1] {
		e := t.Field(i)
		if e.Tag.Get("json") != "" || e.Type.Kind() != reflect.Struct {
			return false
		}
		t = e.Type
	}
	return true
}

// object is the schema of struct t: its fields as properties.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props, required := map[string]any{}, []string{}
	for _, f := range jsonFields(t) {
		props[f.name] = g.schema(f.field.Type)
		if !f.optional {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// OpenAPI is the OpenAPI 3.0 document of the routes that answer for the
// loaded model, as GET /docs serves it.
func (s *Server) OpenAPI() map[string]any {
	g := &schemaGen{components: map[string]any{}, names: map[reflect.Type]string{}}
	paths := map[string]map[string]any{}
	for _, e := range s.served() {
		op := map[string]any{"summary": e.summary, "operationId": operationID(e)}
		if e.summary == "" {
			op["summary"] = e.method + " " + e.path
		}
		if e.req != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(e.req)}}}
		}
		ok := map[string]any{"description": "OK"}
		if e.resp != nil {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(e.resp)}}
		}
		op["responses"] = map[string]any{"200": ok, "default": map[string]any{"description": "an error: " + e.shape.describe()}}
		if paths[e.path] == nil {
			paths[e.path] = map[string]any{}
		}
		paths[e.path][strings.ToLower(e.method)] = op
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "roformer serve: " + s.opts.Name, "version": "1",
			"description": "The routes that answer for this model (" + s.model.Head.HFClass() + "), made from the server's route table."},
		"paths":      paths,
		"components": map[string]any{"schemas": g.components},
	}
	if s.key != nil {
		doc["components"].(map[string]any)["securitySchemes"] = map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}}
		doc["security"] = []any{map[string]any{"bearer": []any{}}}
	}
	return doc
}

// operationID names a route's operation: its method and path in letters,
// digits and underscores (GET /api-doc/openapi.json: get_api_doc_openapi_json).
func operationID(e route) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(e.method)+e.path)
	for strings.Contains(id, "__") {
		id = strings.ReplaceAll(id, "__", "_")
	}
	return strings.TrimSuffix(id, "_")
}

// describe says what an error answer of shape sh holds.
func (sh errShape) describe() string {
	switch sh {
	case shapeTEI:
		return `TEI's {"error", "error_type"}`
	case shapeOpenAI:
		return `OpenAI's {"error": {"message", "type", "param", "code"}}`
	}
	return `{"error": "…"}`
}

// docsCache holds GET /docs's answer, made once: the routes, the model and
// the key are fixed when New returns, so the document is too, and a GET,
// which takes no admission slot, costs a copy of the bytes rather than the
// reflection over every route's types.
type docsCache struct {
	once sync.Once
	body []byte
}

func (s *Server) docs(w http.ResponseWriter, r *http.Request) {
	s.docsCache.once.Do(func() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as writeJSON
		if err := enc.Encode(s.OpenAPI()); err != nil {
			return // not cached: writeJSON answers the error below
		}
		s.docsCache.body = buf.Bytes()
	})
	if s.docsCache.body == nil {
		writeJSON(w, http.StatusOK, s.OpenAPI())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.docsCache.body) // the client may be gone; nothing to do then
}
