// Command brokensvc stands in for a broken svc build in the upgrade test:
// it prints a version for "version", as svc does, and fails at once when
// asked to serve.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("9.9.9-broken")
		return
	}
	fmt.Fprintln(os.Stderr, "brokensvc: this build cannot serve")
	os.Exit(1)
}
