package server

import (
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/web"
)

// routes is SPEC 9's route table.
func (s *Server) routes() {
	r := mux.NewRouter()
	// Match on the escaped path so that a file name with "/" can be sent
	// percent-encoded ("reports%2Fq3.xlsx") as one {ref}.
	r.UseEncodedPath()
	r.Use(routeName)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apierr.New(apierr.NotFound, "no route %s %s; see SPEC 9 for the API (GET /api/tools lists the tools)", r.Method, r.URL.EscapedPath()))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeErrorStatus(w, r, apierr.New(apierr.ValidationFailed, "method %s is not allowed on %s", r.Method, r.URL.EscapedPath()), http.StatusMethodNotAllowed)
	})

	r.HandleFunc("/healthz", s.handleHealth).Methods("GET", "HEAD")
	r.HandleFunc("/metrics", s.handleMetrics).Methods("GET")

	api := apiRoutes{r}
	api.HandleFunc("/files/upload", s.authed(s.handleUpload)).Methods("POST")
	api.HandleFunc("/files", s.authed(s.handleList)).Methods("GET")
	api.HandleFunc("/files/{ref:.+}/download", s.handleDownload).Methods("GET", "HEAD")
	api.HandleFunc("/files/{ref:.+}/content", s.authed(s.handleContent)).Methods("GET")
	api.HandleFunc("/files/{ref:.+}/convert", s.authed(s.handleConvert)).Methods("POST")
	api.HandleFunc("/files/{ref:.+}/html", s.authed(s.handleMarkdownHTML)).Methods("GET")
	api.HandleFunc("/files/{ref:.+}/pages/{page}", s.authed(s.handlePDFPage)).Methods("GET")
	api.HandleFunc("/files/{ref:.+}", s.authed(s.handleInfo)).Methods("GET", "HEAD")
	api.HandleFunc("/files/{ref:.+}", s.authed(s.handleDelete)).Methods("DELETE")
	api.HandleFunc("/events", s.authed(s.handleEvents)).Methods("GET")
	api.HandleFunc("/run", s.authed(s.handleRun)).Methods("POST")
	api.HandleFunc("/tools", s.authed(s.handleTools)).Methods("GET")
	api.HandleFunc("/tools/{name}", s.authed(s.handleCallTool)).Methods("POST")
	api.HandleFunc("/types", s.authed(s.handleTypes)).Methods("GET")
	api.HandleFunc("/runs/events", s.authed(s.handleRunEvents)).Methods("GET")
	api.HandleFunc("/runs/{id}", s.authed(s.handleGetRun)).Methods("GET")
	api.HandleFunc("/history", s.authed(s.handleHistory)).Methods("GET")
	api.HandleFunc("/instructions/{id}", s.authed(s.handleReportInstruction)).Methods("POST")

	r.Handle("/mcp", s.authed(s.handleMCP))

	r.Handle("/", web.Index()).Methods("GET", "HEAD")
	r.Handle("/static/{file}", web.Static()).Methods("GET", "HEAD")
	s.router = r
}

// refVar is the {ref} of a file route, percent-decoded.
func refVar(r *http.Request) (string, error) {
	raw := mux.Vars(r)["ref"]
	ref, err := url.PathUnescape(raw)
	if err != nil {
		return "", apierr.New(apierr.ValidationFailed, "file reference %q is not valid percent-encoding", raw)
	}
	return ref, nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// apiRoutes registers routes under /api on the root router itself (a mux
// subrouter would answer 404 instead of 405 for a known path with the
// wrong method).
type apiRoutes struct{ r *mux.Router }

func (a apiRoutes) HandleFunc(path string, f http.HandlerFunc) *mux.Route {
	return a.r.HandleFunc("/api"+path, f)
}
