package pgtest

import "syscall"

// procAttr runs a process as cred (nil: as this process's user) and makes
// the kernel kill it if the test binary dies without running its cleanups
// (a panic, or go test's -timeout).
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}
