package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultFile is the name runtime.yaml errors carry when the config did not
// come from a file.
const DefaultFile = "runtime.yaml"

// Load reads, decodes and validates the runtime.yaml at path. Errors about
// its content are *Error or Errors naming the file's base name and the line;
// a missing file gives an error wrapping fs.ErrNotExist, so the caller can
// fall back to Default for the default path only.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data, filepath.Base(path))
	if err != nil {
		return nil, err
	}
	c.Dir = filepath.Dir(path)
	return c, nil
}

// Parse decodes runtime.yaml content over Default and validates it. name is
// the file name errors carry ("" means runtime.yaml). Every key must be known;
// lists and mappings replace the defaults whole, structs key by key, and an
// empty value keeps the default.
func Parse(data []byte, name string) (*Config, error) {
	if name == "" {
		name = DefaultFile
	}
	c := Default()
	c.file = name
	d := &decoder{file: name, lines: map[string]int{}}

	root, err := parseYAML(data, name)
	if err != nil {
		return nil, err
	}
	if root != nil {
		d.decode(root, reflect.ValueOf(c).Elem(), "")
	}
	c.lines = d.lines
	if len(d.errs) > 0 {
		// Type and key problems first: validating half-read values would
		// only add noise about the same lines.
		return nil, result(d.errs)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// syntaxLine pulls the line out of the YAML parser's own messages.
var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML reads the one document of data into a node tree; nil means an
// empty file (all defaults).
func parseYAML(data []byte, name string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err, name)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: name, Line: extra.Line, Msg: "only one YAML document is allowed; remove this ---"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(err, name)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Msg: "want a mapping of keys such as listen: and models:, not " + describe(root)}
	}
	return root, nil
}

// syntaxError converts a parser error. The parser gives no line for
// problems on the first line or in the encoding; those stay line-less.
func syntaxError(err error, name string) error {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
	if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if strings.Contains(msg, "cannot start any token") {
		msg += " (a tab? indent with spaces)"
	}
	return &Error{File: name, Line: line, Msg: "bad YAML: " + msg}
}

// decoder walks the node tree along the Config type itself, rather than
// using yaml's own decoding, so every problem has a line and a dotted field
// path, unknown keys are refused everywhere, and no value is ever echoed
// unless it is safe to show.
type decoder struct {
	file  string
	lines map[string]int // field path -> line of its key or item
	errs  []*Error
}

func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	modelType    = reflect.TypeFor[Model]()
	providerType = reflect.TypeFor[Provider]()
	hookType     = reflect.TypeFor[Hook]()
	policiesType = reflect.TypeFor[ToolPolicies]()
)

// mcpPolicy reads a tools.policies key naming MCP tools (it has "__"): the
// built-in tools are fields, MCP tools are known only once their servers
// answer, so their keys are kept as patterns and checked against
// mcp.servers by Validate.
func (d *decoder) mcpPolicy(n *yaml.Node, p *ToolPolicies, key, path string) {
	var s string
	d.decode(n, reflect.ValueOf(&s).Elem(), path)
	p.MCP = append(p.MCP, PolicyPattern{Pattern: key, Policy: s})
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		// Aliases would make one line stand for many fields; refusing them
		// also rules out alias bombs.
		d.fail(n, path, "aliases (*name) are not supported; write the value out")
		return
	}
	if isNull(n) {
		return // an empty value keeps the default
	}
	t := v.Type()
	switch {
	case t == durationType:
		d.duration(n, v, path)
	case t.Kind() == reflect.Pointer:
		nv := reflect.New(t.Elem())
		if !v.IsNil() {
			nv.Elem().Set(v.Elem())
		}
		d.decode(n, nv.Elem(), path)
		v.Set(nv)
	case t.Kind() == reflect.Struct:
		d.strct(n, v, path)
	case t.Kind() == reflect.Slice:
		d.list(n, v, path)
	case t.Kind() == reflect.Map:
		d.dict(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

// strct decodes a mapping into the fields of a struct, key by key.
func (d *decoder) strct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of keys, not %s", describe(n))
		return
	}
	fields, known := yamlFields(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain words, not %s", describe(k))
			continue
		}
		fp := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.fail(k, fp, "given twice (first on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		idx, ok := fields[k.Value]
		if !ok && v.Type() == policiesType && mcpPolicyKey(k.Value) {
			d.lines[fp] = k.Line
			d.mcpPolicy(val, v.Addr().Interface().(*ToolPolicies), k.Value, fp)
			continue
		}
		if !ok {
			d.unknown(k, path, known)
			continue
		}
		d.lines[fp] = k.Line
		d.decode(val, v.Field(idx), fp)
	}
}

// unknown reports a key the schema does not have. A key that looks like it
// holds a secret gets the rule instead of the list: secrets come only from
// the environment.
func (d *decoder) unknown(k *yaml.Node, path string, known []string) {
	if !plainWord(k.Value) || looksSecret(k.Value) {
		d.fail(k, join(path, "?"), "unknown key (not shown: it may be a secret); known keys here: %s", strings.Join(known, ", "))
		return
	}
	fp := join(path, k.Value)
	if secretKey(k.Value) {
		envKey := "a *_env key"
		for _, name := range known {
			if strings.HasSuffix(name, "_env") {
				envKey = name
				break
			}
		}
		d.fail(k, fp, "unknown key: secrets are never written in runtime.yaml; put the secret in an environment variable and set %s to its name (name the environment variable, not the secret)", envKey)
		return
	}
	d.fail(k, fp, "unknown key; known keys here: %s", strings.Join(known, ", "))
}

// list decodes a sequence; it replaces the default list whole. Items of
// models start from defaultModel and hooks from defaultHook, so an item names
// only what differs.
func (d *decoder) list(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, not %s", describe(n))
		return
	}
	et := v.Type().Elem()
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		ip := path + "[" + strconv.Itoa(i) + "]"
		d.lines[ip] = item.Line
		ev := reflect.New(et).Elem()
		switch et {
		case modelType:
			ev.Set(reflect.ValueOf(defaultModel()))
		case hookType:
			ev.Set(reflect.ValueOf(defaultHook()))
		}
		if isNull(item) {
			d.fail(item, ip, "empty item; remove the - or give it a value")
		} else {
			d.decode(item, ev, ip)
		}
		if et == providerType {
			fillProvider(ev.Addr().Interface().(*Provider))
		}
		out = reflect.Append(out, ev)
	}
	if out.Len() == 0 {
		out = reflect.Zero(v.Type()) // [] and the default nil compare equal
	}
	v.Set(out)
}

// dict decodes a mapping with free keys (chains); it replaces the default
// mapping whole, so removing the default model does not leave a dangling
// default chain behind.
func (d *decoder) dict(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, not %s", describe(n))
		return
	}
	t := v.Type()
	out := reflect.MakeMapWithSize(t, len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || isNull(k) {
			d.fail(k, path, "keys must be plain words, not %s", describe(k))
			continue
		}
		fp := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.fail(k, fp, "given twice (first on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[fp] = k.Line
		ev := reflect.New(t.Elem()).Elem()
		d.decode(val, ev, fp)
		out.SetMapIndex(reflect.ValueOf(k.Value), ev)
	}
	v.Set(out)
}

// scalar decodes strings, booleans and numbers. YAML's implicit typing is
// taken strictly where it matters: "yes" is not a boolean and "128000" in
// quotes is not a number, so what is read is what was meant.
func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	want := map[reflect.Kind]string{
		reflect.String:  "a string",
		reflect.Bool:    "true or false",
		reflect.Int:     "a whole number",
		reflect.Int64:   "a whole number",
		reflect.Float64: "a number",
	}[v.Kind()]
	if want == "" {
		// A field type added to the schema without a decoder here: fail
		// loudly but never panic on user input.
		d.fail(n, path, "internal error: no decoder for %s", v.Type())
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want %s, not %s", want, describe(n))
		return
	}
	tag := n.ShortTag()
	bad := func() { d.fail(n, path, "want %s, not %s", want, describe(n)) }
	switch v.Kind() {
	case reflect.String:
		switch tag {
		case "!!str", "!!int", "!!float", "!!bool":
			v.SetString(n.Value)
		default:
			bad()
		}
	case reflect.Bool:
		var b bool
		if tag != "!!bool" || n.Decode(&b) != nil {
			bad()
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		var i int64
		if tag != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			bad()
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			bad()
			return
		}
		v.SetFloat(f)
	}
}

// duration reads Go durations such as 30s or 1h30m. A bare number other than
// 0 is refused: 30 would mean 30 nanoseconds, which nobody means.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	const want = "want a duration with a unit, such as 30ms, 2m or 1h30m"
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "%s, not %s", want, describe(n))
		return
	}
	switch n.ShortTag() {
	case "!!str":
		dur, err := time.ParseDuration(n.Value)
		if err != nil {
			d.fail(n, path, "%s", want)
			return
		}
		v.SetInt(int64(dur))
	case "!!int":
		if n.Value != "0" {
			d.fail(n, path, "%s (a bare number is ambiguous)", want)
			return
		}
		v.SetInt(0)
	default:
		d.fail(n, path, "%s, not %s", want, describe(n))
	}
}

// yamlFields maps the yaml keys of a struct to field indexes, and lists the
// keys sorted for error messages.
func yamlFields(t reflect.Type) (map[string]int, []string) {
	fields := map[string]int{}
	var known []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fields[name] = i
		known = append(known, name)
	}
	sort.Strings(known)
	return fields, known
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, never what it says: the value may be a secret.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "an empty value"
	case "!!str":
		return "a string"
	}
	return "a value tagged " + show(n.ShortTag())
}

// join appends a key to a dotted field path; keys that are not plain words
// are quoted so the path stays one unambiguous line.
func join(path, key string) string {
	if !plainWord(key) && key != "?" {
		key = show(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
