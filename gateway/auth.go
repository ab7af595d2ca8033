package gateway

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
)

// TokenFile is the name of the access token file inside the data dir.
const TokenFile = "token"

// CookieName is the cookie POST /login sets.
const CookieName = "mirror_token"

// LoadToken returns the access token: the value of the variable auth.token_env
// names when it is set, else the token kept in dataDir/token, created (0600)
// on first use.
func LoadToken(cfg *config.Config, dataDir string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.Auth.TokenEnv != "" {
		if t := strings.TrimSpace(getenv(cfg.Auth.TokenEnv)); t != "" {
			if len(t) < 16 {
				return "", fmt.Errorf("auth: the token in $%s is shorter than 16 characters; use a longer one", cfg.Auth.TokenEnv)
			}
			return t, nil
		}
	}
	b, err := datadir.ReadFile(dataDir, TokenFile)
	if err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t := base64.RawURLEncoding.EncodeToString(raw[:])
	if err := datadir.WriteFile(dataDir, TokenFile, []byte(t+"\n")); err != nil {
		return "", fmt.Errorf("keep the access token: %w", err)
	}
	return t, nil
}

// checker compares presented tokens with the real one in constant time.
type checker struct{ token []byte }

func (c checker) ok(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), c.token) == 1
}

// presented returns the token a request carries and whether it carried one.
func presented(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		t, found := strings.CutPrefix(h, "Bearer ")
		if !found {
			return "", true // an Authorization header of another scheme is a wrong one
		}
		return strings.TrimSpace(t), true
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		return ck.Value, true
	}
	return "", false
}
