// Package mlog stands in for monis.app/mlog in the Secrets Store CSI driver's build: the names
// the driver calls (cmd/secrets-store-csi-driver, pkg/secrets-store), each over klog, which
// the driver's own flags (-v) already configure.
package mlog

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// LogFormat is a log output format.
type LogFormat string

const (
	// FormatText is klog's text format: the only one the stand-in writes.
	FormatText LogFormat = "text"
	// FormatJSON is refused: the stand-in writes text only.
	FormatJSON LogFormat = "json"
)

// Setup returns what to run at exit: flush the logs.
func Setup() func() {
	return klog.Flush
}

// ValidateAndSetKlogLevelAndFormatGlobally accepts the level klog's flags set and the text
// format; JSON is refused.
func ValidateAndSetKlogLevelAndFormatGlobally(_ context.Context, level klog.Level, format LogFormat) error {
	if format != FormatText {
		return fmt.Errorf("log format %q: this build of the driver writes text logs only", format)
	}
	klog.V(1).InfoS("log level", "level", level)
	return nil
}

// Error logs err with msg and key/value pairs.
func Error(msg string, err error, keysAndValues ...any) {
	klog.ErrorS(err, msg, keysAndValues...)
}

// Fatal logs err and exits with code 1.
func Fatal(err error, keysAndValues ...any) {
	klog.ErrorS(err, "fatal", keysAndValues...)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}
