package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cliConfig is what `svc login` keeps in the user's config directory: the
// server's address and a token for it. The file is the person's
// credential: 0600 in a 0700 directory, never printed.
type cliConfig struct {
	Addr  string `json:"addr"`
	Token string `json:"token"`
}

// cliConfigPath is $XDG_CONFIG_HOME/svc/config.json (or the platform's user
// config directory).
func cliConfigPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config directory: %w", err)
	}
	return filepath.Join(dir, "svc", "config.json"), nil
}

// loadConfig reads the config file; a missing one is the zero config. A
// file others can read or write is refused (fail closed: the token may
// have leaked, and another user may have planted the address).
func loadConfig(path string) (cliConfig, error) {
	var c cliConfig
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return c, fmt.Errorf("%s is readable or writable by others (mode %04o); run chmod 600 %s, and svc login again if others may have read the token", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w (run svc login again)", path, err)
	}
	return c, nil
}

// saveConfig writes the config file whole (a new file renamed over the
// old), 0600 in a directory it makes or tightens to 0700.
func saveConfig(path string, c cliConfig) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".config-*.json") // created 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// resolve picks the address and token a command uses: flags, then
// SVC_ADDR and SVC_TOKEN, then the config file. The file's token is used
// only with the file's address: a token is never sent to a server it was
// not made for.
func resolve(flagAddr, flagToken, envAddr, envToken string, file cliConfig) (addr, token string) {
	addr = firstOf(flagAddr, envAddr, file.Addr)
	token = firstOf(flagToken, envToken)
	if token == "" && sameAddr(addr, file.Addr) {
		token = file.Token
	}
	return addr, token
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// sameAddr compares addresses as api.New reads them (a trailing slash is
// the same server).
func sameAddr(a, b string) bool {
	return a != "" && strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
