package assertion_test

import (
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/svchost/svc/assertion"
)

// An app checks every request's assertion and greets the caller. svc's
// base URL and the app's ID come from the app's own configuration (the
// spec's env, here SVC_BASE_URL and APP_ID).
func Example() {
	svcURL := os.Getenv("SVC_BASE_URL") // e.g. http://svc.example.com:8080
	appID := os.Getenv("APP_ID")        // this app's ID, app_…
	v, err := assertion.New(assertion.Options{
		JWKSURL:  svcURL + "/.well-known/jwks.json",
		Issuer:   svcURL, // svc's server.issuer; by default its base URL
		Audience: appID,
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c, _ := assertion.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s (%s), member of %v\n", c.Name, c.Subject, c.Groups)
	})
	log.Fatal(http.ListenAndServe(":8080", v.Middleware(mux)))
}
