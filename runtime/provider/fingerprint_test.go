package provider

import (
	"regexp"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	keys := []string{"AIzaSyD-0123456789abcdefghijklmnopqrstu", "sk-ant-api03-secret", "sk-proj-abc", "x"}
	seen := map[string]string{}
	hex12 := regexp.MustCompile(`^[0-9a-f]{12}$`)
	for _, k := range keys {
		fp := Fingerprint(k)
		if !hex12.MatchString(fp) {
			t.Fatalf("Fingerprint(%q) = %q, want 12 hex digits", k, fp)
		}
		if fp != Fingerprint(k) {
			t.Fatalf("Fingerprint(%q) is not stable", k)
		}
		if other, dup := seen[fp]; dup {
			t.Fatalf("%q and %q share fingerprint %s", k, other, fp)
		}
		seen[fp] = k
		// No piece of the key survives, however short.
		for i := 0; i+4 <= len(k); i++ {
			if strings.Contains(fp, strings.ToLower(k[i:i+4])) && strings.ContainsAny(k[i:i+4], "ghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ-_") {
				t.Fatalf("fingerprint %s contains key text %q", fp, k[i:i+4])
			}
		}
		if strings.Contains(fp, k) {
			t.Fatalf("fingerprint %s contains the key", fp)
		}
	}
	if Fingerprint("") != "" {
		t.Fatal("no key must have no fingerprint")
	}
}
