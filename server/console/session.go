package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duraton/duraton/delivery"
)

const cookieName = "duraton_console"

// ProjectCookie names the project of the visitor's session. It authenticates nothing
// (the session cookie does): replicas on a sharded database route the console's
// requests by it to the replica that leads the project's shard, where the session is.
const ProjectCookie = "duraton_project"

// session is one logged-in browser: its project and its CSRF token.
type session struct {
	project string
	csrf    string
	expires time.Time
	created time.Time
}

// sessions is the server-side session table, keyed by the SHA-256 of the cookie value so
// the table holds nothing a reader could replay. It is bounded in total and per project,
// and one project's logins never end another's sessions: a project at its own limit
// loses its oldest session; a full table drops expired sessions, then the new session's
// project's oldest, and refuses the login when that project has none to give up.
type sessions struct {
	mu         sync.Mutex
	byID       map[string]*session
	perProject map[string]int
	max        int
	maxProject int
	ttl        time.Duration
	now        func() time.Time
}

// errSessionsFull refuses a login when the table is full of other projects' sessions.
var errSessionsFull = errors.New("the console has as many sessions as it keeps, none of this project's; try again when some have expired")

func newSessions(max, maxProject int, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, perProject: map[string]int{}, max: max, maxProject: maxProject, ttl: ttl, now: now}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// create starts a session for project and returns the cookie value.
func (s *sessions) create(project string) (string, *session, error) {
	id := randomToken()
	now := s.now()
	sess := &session{project: project, csrf: randomToken(), expires: now.Add(s.ttl), created: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		for k, v := range s.byID {
			if !now.Before(v.expires) {
				s.deleteLocked(k)
			}
		}
	}
	for s.perProject[project] >= s.maxProject || (len(s.byID) >= s.max && s.perProject[project] > 0) {
		oldest := s.oldestLocked(project)
		if oldest == "" {
			break
		}
		s.deleteLocked(oldest)
	}
	if len(s.byID) >= s.max {
		return "", nil, errSessionsFull
	}
	s.byID[hashID(id)] = sess
	s.perProject[project]++
	return id, sess, nil
}

// oldestLocked is the key of project's oldest session ("" when it has none).
func (s *sessions) oldestLocked(project string) string {
	var oldest string
	for k, v := range s.byID {
		if v.project == project && (oldest == "" || v.created.Before(s.byID[oldest].created)) {
			oldest = k
		}
	}
	return oldest
}

func (s *sessions) deleteLocked(key string) {
	sess, ok := s.byID[key]
	if !ok {
		return
	}
	delete(s.byID, key)
	if s.perProject[sess.project]--; s.perProject[sess.project] <= 0 {
		delete(s.perProject, sess.project)
	}
}

// get returns the live session of a cookie value.
func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[hashID(id)]
	if !ok {
		return nil, false
	}
	if !s.now().Before(sess.expires) {
		s.deleteLocked(hashID(id))
		return nil, false
	}
	return sess, true
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	s.deleteLocked(hashID(id))
	s.mu.Unlock()
}

func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// tokenKey is how the login limiter remembers a token a client logged in with: its
// SHA-256, never the token itself.
func tokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value, Path: "/console", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.cfg.SecureCookie || r.TLS != nil,
	})
}

// withSession runs h with the visitor's session. Without one, dev mode opens a session
// on the dev project (still needed: it carries the CSRF token); serve mode sends a page
// load to the login page and refuses anything else. A POST must carry the session's CSRF
// token in its form.
func (c *Console) withSession(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var id string
		if ck, err := r.Cookie(cookieName); err == nil {
			id = ck.Value
		}
		sess, ok := c.sessions.get(id)
		if !ok {
			switch {
			case r.Method != http.MethodGet:
				c.fail(w, r, http.StatusForbidden, "no console session: load the page again (and log in) before acting")
				return
			case c.cfg.Dev:
				var err error
				if id, sess, err = c.sessions.create(c.cfg.DevProject); err != nil {
					c.fail(w, r, http.StatusServiceUnavailable, err.Error())
					return
				}
				c.setCookie(w, r, id, int(c.cfg.SessionTTL.Seconds()))
			case r.Header.Get("HX-Request") != "":
				w.Header().Set("HX-Redirect", "/console/login")
				c.fail(w, r, http.StatusUnauthorized, "session expired: log in again")
				return
			default:
				http.Redirect(w, r, "/console/login", http.StatusSeeOther)
				return
			}
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				c.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.csrf)) != 1 {
				c.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	}
}

// maxFormBytes bounds a console form post; the largest is a login token.
const maxFormBytes = 16 << 10

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Dev {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", pageData{Title: "Log in"})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Dev {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusBadRequest, "login", pageData{Title: "Log in", Error: "form: " + err.Error()})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" {
		c.render(w, r, http.StatusBadRequest, "login", pageData{Title: "Log in", Error: "token: enter the project's API token"})
		return
	}
	// An address over its failure budget is refused before the token is looked up, so
	// it learns nothing about the tokens it tries; a token it logged in with before is
	// still let in (package authlimit).
	addr, key := clientAddr(r), tokenKey(token)
	if blocked, wait := c.logins.Blocked(addr, key); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		c.render(w, r, http.StatusTooManyRequests, "login", pageData{Title: "Log in", Error: "too many failed logins from this address; wait a minute"})
		return
	}
	project, err := c.cfg.ProjectForToken(r.Context(), token)
	if err != nil && !errors.Is(err, delivery.ErrNotFound) {
		c.failErr(w, r, err)
		return
	}
	if err != nil {
		c.logins.Fail(addr)
		c.render(w, r, http.StatusUnauthorized, "login", pageData{Title: "Log in", Error: "invalid token"})
		return
	}
	c.logins.Succeeded(addr, key)
	id, _, err := c.sessions.create(project)
	if err != nil {
		w.Header().Set("Retry-After", "60")
		c.render(w, r, http.StatusServiceUnavailable, "login", pageData{Title: "Log in", Error: err.Error()})
		return
	}
	c.setCookie(w, r, id, int(c.cfg.SessionTTL.Seconds()))
	http.SetCookie(w, &http.Cookie{
		Name: ProjectCookie, Value: project, Path: "/console", MaxAge: int(c.cfg.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.cfg.SecureCookie || r.TLS != nil,
	})
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.remove(ck.Value)
	}
	c.setCookie(w, r, "", -1)
	if c.cfg.Dev {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
