package s3test

import "syscall"

// procAttr makes the kernel kill the server if the test binary dies
// without running its cleanups (a panic, or go test's -timeout).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
