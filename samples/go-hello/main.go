// Command go-hello is a sample app for svc: a web server on the standard
// library that says hello, reports its health, and can be told to fail.
//
//	GET  /           hello from go, and $GREETING
//	GET  /healthz    200, or 500 once /break was called
//	GET  /env/NAME   the value of the environment variable NAME
//	POST /break      /healthz answers 500 from then on (until the process ends)
//	POST /crash      writes crash-forever in the working directory and exits 1;
//	                 while that file is there the app exits at start
//
// It listens on $PORT (8080 when unset) on every interface and logs one
// line per request to stdout.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync/atomic"
)

// marker is the file whose presence makes the app exit at start.
const marker = "crash-forever"

func main() {
	log.SetFlags(0)
	log.SetOutput(os.Stdout)
	if _, err := os.Stat(marker); err == nil {
		log.Printf("go-hello: %s exists: exiting at once (a fresh deploy clears it)", marker)
		os.Exit(1)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	var broken atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from go: %s\n", os.Getenv("GREETING"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /env/{name}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := os.LookupEnv(r.PathValue("name"))
		if !ok {
			http.Error(w, "not set", http.StatusNotFound)
			return
		}
		fmt.Fprint(w, v)
	})
	mux.HandleFunc("POST /break", func(w http.ResponseWriter, r *http.Request) {
		broken.Store(true)
		fmt.Fprintln(w, "broken: /healthz answers 500 from now on")
	})
	mux.HandleFunc("POST /crash", func(w http.ResponseWriter, r *http.Request) {
		if err := os.WriteFile(marker, []byte("written by POST /crash\n"), 0o644); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "crashing")
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		log.Printf("go-hello: POST /crash: exiting with code 1")
		os.Exit(1)
	})
	addr := ":" + port
	log.Printf("go-hello: listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, logRequests(mux)))
}

// logRequests logs one line per request.
func logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		log.Printf("go-hello: %s %s from %s", r.Method, r.URL.Path, host)
		h.ServeHTTP(w, r)
	})
}
