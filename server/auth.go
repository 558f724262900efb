package server

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Token is a bearer token bound to one workspace.
type Token struct {
	Secret    string
	Workspace string
}

// ParseToken reads "SECRET:WORKSPACE" (the form of --token). A token without
// ":WORKSPACE" is bound to the workspace "default".
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	secret, ws, found := strings.Cut(s, ":")
	if !found {
		ws = "default"
	}
	secret, ws = strings.TrimSpace(secret), strings.TrimSpace(ws)
	if len(secret) < 8 {
		return Token{}, fmt.Errorf("token %q is too short: use at least 8 characters (e.g. `openssl rand -hex 16`)", redactSecret(secret))
	}
	for _, r := range secret {
		if r <= ' ' || r == 0x7f {
			return Token{}, errors.New("a token may not contain spaces or control characters")
		}
	}
	if ws == "" {
		return Token{}, fmt.Errorf("token %s…: empty workspace name after ':'", redactSecret(secret))
	}
	if _, err := store.CleanName(ws); err != nil || strings.Contains(ws, "/") {
		return Token{}, fmt.Errorf("token %s…: bad workspace name %q", redactSecret(secret), ws)
	}
	return Token{Secret: secret, Workspace: ws}, nil
}

func redactSecret(secret string) string {
	if len(secret) <= 4 {
		return "****"
	}
	return secret[:4] + "…"
}

// ReadTokensFile reads a tokens file: one "SECRET:WORKSPACE" (or
// "SECRET WORKSPACE") per line; blank lines and lines starting with '#'
// are ignored.
func ReadTokensFile(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Token
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if fs := strings.Fields(t); len(fs) == 2 && !strings.Contains(t, ":") {
			t = fs[0] + ":" + fs[1]
		}
		tok, err := ParseToken(t)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		out = append(out, tok)
	}
	return out, sc.Err()
}

// tokenSet finds a token's workspace by the token's hash, so lookups do not
// compare secrets byte by byte.
type tokenSet struct {
	byHash map[[32]byte]Token
}

func newTokenSet(tokens []Token) (*tokenSet, error) {
	ts := &tokenSet{byHash: map[[32]byte]Token{}}
	for _, t := range tokens {
		h := sha256.Sum256([]byte(t.Secret))
		if prev, dup := ts.byHash[h]; dup && prev.Workspace != t.Workspace {
			return nil, fmt.Errorf("token %s is given for two workspaces (%s and %s)", redactSecret(t.Secret), prev.Workspace, t.Workspace)
		}
		ts.byHash[h] = t
	}
	return ts, nil
}

func (ts *tokenSet) empty() bool { return len(ts.byHash) == 0 }
func (ts *tokenSet) count() int  { return len(ts.byHash) }

func (ts *tokenSet) workspaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts.byHash {
		if !seen[t.Workspace] {
			seen[t.Workspace] = true
			out = append(out, t.Workspace)
		}
	}
	sort.Strings(out)
	return out
}

func (ts *tokenSet) lookup(secret string) (Token, bool) {
	h := sha256.Sum256([]byte(secret))
	t, ok := ts.byHash[h]
	if ok && subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) != 1 {
		return Token{}, false
	}
	return t, ok
}

// principal is who a request acts as.
type principal struct {
	Workspace string
	// TokenID is a short hash of the token for logs (never the token).
	TokenID string
	// Signed is set for a request admitted by a signed URL: it may only
	// download the file the URL names.
	Signed bool
}

// principalOf is the principal authed admitted r with. It travels in the
// request's reqInfo, which the middleware put in its context already (a
// context value of its own cost every request a copy of the request).
func principalOf(r *http.Request) principal {
	return info(r).principal
}

// authenticate resolves the request's workspace from its bearer token.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	if s.tokens.empty() {
		return principal{Workspace: s.cfg.Workspace}, nil
	}
	h := r.Header.Get("Authorization")
	scheme, secret, _ := strings.Cut(h, " ")
	if h == "" {
		return principal{}, apierr.New(apierr.Unauthorized, "this server needs a bearer token: send \"Authorization: Bearer TOKEN\" (CLI: --token TOKEN)")
	}
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return principal{}, apierr.New(apierr.Unauthorized, "malformed Authorization header; send \"Authorization: Bearer TOKEN\"")
	}
	t, ok := s.tokens.lookup(strings.TrimSpace(secret))
	if !ok {
		return principal{}, apierr.New(apierr.Unauthorized, "the bearer token is not valid for this server")
	}
	sum := sha256.Sum256([]byte(t.Secret))
	return principal{Workspace: t.Workspace, TokenID: hex.EncodeToString(sum[:4])}, nil
}

// authed wraps a handler that needs a principal.
func (s *Server) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metaclaw"`)
			s.writeError(w, r, err)
			return
		}
		ri := info(r)
		ri.workspace, ri.token, ri.principal = p.Workspace, p.TokenID, p
		next(w, r)
	}
}

// loadSecret reads the URL-signing key, creating it (0600) on first use.
func loadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, derr := hex.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(key) < 32 {
			return nil, fmt.Errorf("%s is not a valid signing key (64 hex digits); delete it to make a new one", path)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race
		return loadSecret(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return key, nil
}

// sign is the HMAC of a signed download URL over workspace, file id and
// expiry.
func (s *Server) sign(workspace, id string, expires int64) string {
	m := hmac.New(sha256.New, s.secret)
	fmt.Fprintf(m, "metaclaw-download-v1\n%s\n%s\n%d", workspace, id, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signedURL is an absolute URL that downloads file id of workspace without
// a token until it expires.
func (s *Server) signedURL(r *http.Request, workspace, id string) (string, time.Time) {
	exp := time.Now().Add(s.cfg.SignedURLTTL).Truncate(time.Second)
	q := url.Values{}
	q.Set("ws", workspace)
	q.Set("expires", strconv.FormatInt(exp.Unix(), 10))
	q.Set("sig", s.sign(workspace, id, exp.Unix()))
	return s.baseURL(r) + "/api/files/" + id + "/download?" + q.Encode(), exp
}

func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// verifySigned checks a signed download URL's query for file ref.
func (s *Server) verifySigned(r *http.Request, ref string) (principal, error) {
	q := r.URL.Query()
	ws, expStr, sig := q.Get("ws"), q.Get("expires"), q.Get("sig")
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if ws == "" || err != nil || sig == "" {
		return principal{}, apierr.New(apierr.Unauthorized, "malformed signed URL; ask for a new one with GET /api/files/{ref}/content")
	}
	want := s.sign(ws, strings.ToLower(ref), exp)
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return principal{}, apierr.New(apierr.Unauthorized, "the signed URL's signature does not match (it was changed); ask for a new one with GET /api/files/{ref}/content")
	}
	if time.Now().Unix() > exp {
		return principal{}, apierr.New(apierr.Unauthorized, "the signed URL expired at %s; ask for a new one with GET /api/files/{ref}/content",
			time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	return principal{Workspace: ws, Signed: true, TokenID: "signed"}, nil
}

// protect refuses what a browser could be tricked into sending: a
// cross-origin state-changing request (another site POSTing to the API)
// and, on a server without tokens, a request addressed to a name other than
// a loopback one (DNS rebinding: a hostile name resolving to 127.0.0.1).
// Clients that are not browsers send neither Origin nor Sec-Fetch-Site and
// are not affected.
func (s *Server) protect(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apierr.New(apierr.Unauthorized, "cross-origin request refused: the API only answers pages served by this server"))
	}))
	var publicHost string
	if u, err := url.Parse(s.cfg.PublicURL); err == nil {
		publicHost = u.Hostname()
	}
	guarded := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tokens.empty() {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if !isLoopbackHost(host) && (publicHost == "" || !strings.EqualFold(host, publicHost)) {
				s.writeError(w, r, apierr.New(apierr.Unauthorized,
					"this server has no API tokens and only answers requests addressed to localhost or 127.0.0.1 (got Host %q)", r.Host))
				return
			}
		}
		guarded.ServeHTTP(w, r)
	})
}
