package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// maxURLFileBytes bounds what is read of Options.RedisURLFile.
const maxURLFileBytes = 64 << 10

// redisURL returns the Redis URL of the options: RedisURL, or the content
// of RedisURLFile (trimmed of white space), which must be a regular file.
// Its errors name the file, never what it holds.
func (o Options) redisURL() (string, error) {
	if o.RedisURLFile == "" {
		return o.RedisURL, nil
	}
	if o.RedisURL != "" {
		return "", fmt.Errorf("%w: RedisURL and RedisURLFile are both set: give one", ErrOptions)
	}
	// O_NONBLOCK: opening a FIFO for reading would wait for a writer.
	f, err := os.OpenFile(o.RedisURLFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("server: Redis URL file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", fmt.Errorf("server: Redis URL file: %w", err)
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: Redis URL file %s is not a regular file", ErrOptions, o.RedisURLFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxURLFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("server: Redis URL file %s: %w", o.RedisURLFile, err)
	}
	if len(b) > maxURLFileBytes {
		return "", fmt.Errorf("%w: Redis URL file %s holds more than %d bytes", ErrOptions, o.RedisURLFile, maxURLFileBytes)
	}
	url := strings.TrimSpace(string(b))
	if url == "" {
		return "", fmt.Errorf("%w: Redis URL file %s is empty", ErrOptions, o.RedisURLFile)
	}
	return url, nil
}

// errCmdline is why /debug/pprof/cmdline is not served.
var errCmdline = errors.New("not served: the command line can hold secrets (a --redis URL with its password)")
