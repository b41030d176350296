//go:build !linux

package vaulttest

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
