package provider

import (
	"crypto/sha256"
	"encoding/hex"
)

// fingerprintDomain separates these hashes from any other sha256 of a key,
// so a fingerprint cannot be matched against a table of bare key hashes.
const fingerprintDomain = "mirror/provider-key/v1\x00"

// Fingerprint returns a short stable id of an API key (12 hex digits of a
// domain-separated SHA-256), for quota accounting and display: two chats
// with the same key share a quota, and an operator can tell keys apart
// without seeing them. It is not reversible in practice, and 48 bits keep
// accidental collisions among a handful of keys negligible. An empty key
// (local servers) has the empty fingerprint.
func Fingerprint(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(fingerprintDomain + key))
	return hex.EncodeToString(sum[:6])
}
