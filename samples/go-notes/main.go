// Command go-notes is a sample app for svc that keeps data in a volume: a
// web server on the standard library that appends notes to a file in its
// volume and reads them back.
//
//	GET  /         the notes, one per line, and $VERSION
//	POST /notes    appends the request body (one line) to the notes
//	GET  /healthz  200
//
// The volume is the directory $SVC_VOLUME_DATA (svc sets it for a volume
// named data; /data when unset). It listens on $PORT (8080 when unset).
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

func main() {
	log.SetFlags(0)
	log.SetOutput(os.Stdout)
	dir := os.Getenv("SVC_VOLUME_DATA")
	if dir == "" {
		dir = "/data"
	}
	file := filepath.Join(dir, "notes.txt")
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, err := os.ReadFile(file)
		mu.Unlock()
		if err != nil && !os.IsNotExist(err) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "version %s\n%s", os.Getenv("VERSION"), b)
	})
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		line := strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ") + "\n"
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			_, err = f.WriteString(line)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	log.Printf("go-notes: listening on :%s, notes in %s", port, file)
	log.Fatal(http.ListenAndServe(":"+port, mux))
}
