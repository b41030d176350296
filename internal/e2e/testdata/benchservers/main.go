// Command benchservers runs the peers of the edge benchmark as their own
// processes: "upstream" (a small app answering a fixed page) and "proxy" (a
// bare, tuned httputil.ReverseProxy in front of it). Each prints the address
// it listens on as its first line of output.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchservers upstream|proxy -to http://host:port")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	to := fs.String("to", "", "the upstream of the proxy")
	_ = fs.Parse(os.Args[2:])
	var h http.Handler
	switch os.Args[1] {
	case "upstream":
		page := []byte("hello from the benchmark upstream\n")
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(page)
		})
	case "proxy":
		u, err := url.Parse(*to)
		if err != nil || u.Host == "" {
			fmt.Fprintln(os.Stderr, "proxy: -to must be an http URL")
			os.Exit(2)
		}
		h = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(u)
				pr.SetXForwarded()
			},
			Transport: &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConns:        1024,
				MaxIdleConnsPerHost: 256,
				IdleConnTimeout:     90 * time.Second,
			},
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown server", os.Args[1])
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
