package config

import (
	"regexp"
	"strings"
	"testing"
)

// TestFormsMatchTheirCountedRegexps: each form accepts exactly what the
// regexp with the counted repetition it replaces accepts, at and around
// its length bound and for every kind of character.
func TestFormsMatchTheirCountedRegexps(t *testing.T) {
	for _, tc := range []struct {
		name string
		form form
		was  string
	}{
		{"name", nameRE, `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`},
		{"env", envRE, `^[A-Za-z_][A-Za-z0-9_]{0,127}$`},
		{"word", wordRE, `^[A-Za-z_][A-Za-z0-9_-]{0,39}$`},
		{"node", nodeName, `^[A-Za-z0-9_-]{1,64}$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			was := regexp.MustCompile(tc.was)
			var inputs []string
			for _, n := range []int{0, 1, 2, tc.form.max - 1, tc.form.max, tc.form.max + 1, 300} {
				for _, fill := range []string{"a", "Z", "0", "_", "-", ".", "é", " ", "\n"} {
					for _, head := range []string{"", "a", "0", "_", "-", "."} {
						if n > len(head) {
							inputs = append(inputs, head+strings.Repeat(fill, n-len(head)))
						}
					}
				}
			}
			accepted := 0
			for _, s := range inputs {
				got, want := tc.form.MatchString(s), was.MatchString(s)
				if got != want {
					t.Errorf("%q (%d bytes): form says %v, %s says %v", s, len(s), got, tc.was, want)
				}
				if want {
					accepted++
				}
			}
			if accepted == 0 {
				t.Fatalf("no input accepted: the table tests nothing")
			}
		})
	}
}
