package relay

import (
	"log"

	"jr2.dev/boundary/internal/logline"
)

// ErrorLog is logline.ErrorLog: the one capture of what net/http prints,
// which every host (custodian serve, the mediator of custodian run, the
// Effector) takes, so an error line is the contract's everywhere.
func ErrorLog(l *logline.Writer, listener string) *log.Logger { return logline.ErrorLog(l, listener) }

// CaptureStdLog is logline.CaptureStdLog.
func CaptureStdLog(l *logline.Writer) { logline.CaptureStdLog(l) }
