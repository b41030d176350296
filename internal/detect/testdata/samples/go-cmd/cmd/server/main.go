package main

import (
	"log"
	"net/http"
	"os"

	"github.com/example/todo/internal/api"
)

func main() {
	h := api.New(os.Getenv("DATABASE_URL"))
	srv := &http.Server{Addr: ":9000", Handler: h}
	log.Fatal(srv.ListenAndServe())
}
