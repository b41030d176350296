// Command whoami is a sample app for svc modelled on traefik/whoami: a Go
// service that also ships a Dockerfile, as most do, and that takes its
// port from the -port flag rather than from $PORT. It answers with what it
// knows of itself and of the request.
//
//	GET /        the host name, the -name flag, the request line and headers
//	GET /health  200 ok
//
// Its port is the -port flag, else $WHOAMI_PORT_NUMBER, else 80.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
)

var (
	port string
	name string
)

func init() {
	flag.StringVar(&port, "port", getEnv("WHOAMI_PORT_NUMBER", "80"), "give me a port number")
	flag.StringVar(&name, "name", os.Getenv("WHOAMI_NAME"), "give me a name")
}

func main() {
	flag.Parse()
	http.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	http.HandleFunc("/", whoami)
	log.Printf("Starting up on port %s", port)
	log.Fatal(http.ListenAndServe(":"+port, nil))
}

// whoami writes the host name, the name, and the request as it came.
func whoami(w http.ResponseWriter, r *http.Request) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "Hostname: %s\n", host)
	if name != "" {
		fmt.Fprintf(w, "Name: %s\n", name)
	}
	fmt.Fprintf(w, "RemoteAddr: %s\n", r.RemoteAddr)
	fmt.Fprintf(w, "%s %s %s\n", r.Method, r.URL.RequestURI(), r.Proto)
	fmt.Fprintf(w, "Host: %s\n", r.Host)
	_ = r.Header.Write(w)
}

func getEnv(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
