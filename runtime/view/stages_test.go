package view

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The stage list is pinned three ways: Stages, the pipeline registrations
// in the sources, and the specification's table (testdata/stages.md, copied
// from seed 000 "How it works"). A stage added, renamed or reordered in one
// place and not the others fails here.
func TestStagesPinned(t *testing.T) {
	want := []string{"clear-cut", "agent-history", "turn-context", "media", "checkpoint", "preflight", "admission"}
	if !reflect.DeepEqual(Stages, want) {
		t.Fatalf("Stages = %v, want %v", Stages, want)
	}

	// The specification's table, in its order.
	spec, err := os.ReadFile(filepath.Join("testdata", "stages.md"))
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	row := regexp.MustCompile("(?m)^\\|?\\s*`?([a-z-]+)`?\\s*\\|\\s*(Load-bearing|Seam)\\s*\\|")
	for _, m := range row.FindAllStringSubmatch(string(spec), -1) {
		table = append(table, m[1])
	}
	if !reflect.DeepEqual(table, want) {
		t.Errorf("specification table = %v, want %v", table, want)
	}

	// The registrations in the sources: pipeline's literal, and every
	// function shaped like a stage (func(*build) error) registered once,
	// under the camel-case of its name.
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var registered, funcs []string
	regFunc := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && isStageFunc(d.Type) {
					funcs = append(funcs, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "pipeline" {
						continue
					}
					lit := vs.Values[0].(*ast.CompositeLit)
					for _, el := range lit.Elts {
						pair := el.(*ast.CompositeLit).Elts
						name, _ := strconv.Unquote(pair[0].(*ast.BasicLit).Value)
						registered = append(registered, name)
						regFunc[name] = pair[1].(*ast.Ident).Name
					}
				}
			}
		}
	}
	if !reflect.DeepEqual(registered, want) {
		t.Errorf("pipeline registers %v, want %v", registered, want)
	}
	for _, name := range want {
		if got, w := regFunc[name], camel(name); got != w {
			t.Errorf("stage %s runs %s, want %s", name, got, w)
		}
	}
	if len(funcs) != len(want) {
		t.Errorf("stage-shaped functions %v, want one per stage %v", funcs, want)
	}
}

func isStageFunc(ft *ast.FuncType) bool {
	if ft.Params == nil || len(ft.Params.List) != 1 || ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	star, ok := ft.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	res, ok2 := ft.Results.List[0].Type.(*ast.Ident)
	return ok && ok2 && id.Name == "build" && res.Name == "error"
}

func camel(s string) string {
	parts := strings.Split(s, "-")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}
