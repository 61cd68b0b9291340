package mysql

import (
	"errors"

	driver "github.com/go-sql-driver/mysql"

	"github.com/leaderrun/leaderrun/lease"
)

// Server error numbers the store branches on.
const (
	erDBAccessDenied      = 1044 // no privilege on the database
	erAccessDenied        = 1045 // login refused
	erBadDB               = 1049 // unknown database
	erDupEntry            = 1062 // duplicate key
	erTableAccessDenied   = 1142 // command denied on a table
	erColumnAccessDenied  = 1143
	erUnknownSystemVar    = 1193
	erLockDeadlock        = 1213
	erSpecificAccess      = 1227 // needs a privilege such as SUPER
	erQueryInterrupted    = 1317 // KILL QUERY
	erNotSupportedAuth    = 1251
	erOptionPrevents      = 1290 // --read-only, --super-read-only
	erProcAccessDenied    = 1370 // EXECUTE or ALTER ROUTINE denied
	erPluginNotLoaded     = 1524
	erBinlogIsolation     = 1665 // binlog_format=STATEMENT with READ COMMITTED
	erAccessDeniedNoPass  = 1698
	erReadOnlyTransaction = 1792
	erReadOnlyMode        = 1836
	erSecureTransport     = 3159 // require_secure_transport
)

// permanent reports whether no retry can fix err: a refused login, an
// unknown database, a missing privilege, a read-only server, a session
// setting the server rejects, or a TLS or authentication method the two
// sides cannot agree on. A connection that was refused, timed out or could
// not resolve its host is not permanent: the server may come back.
func permanent(err error) bool {
	var myErr *driver.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case erDBAccessDenied, erAccessDenied, erBadDB, erTableAccessDenied, erColumnAccessDenied,
			erUnknownSystemVar, erSpecificAccess, erNotSupportedAuth, erOptionPrevents, erProcAccessDenied,
			erPluginNotLoaded, erBinlogIsolation, erAccessDeniedNoPass, erReadOnlyTransaction,
			erReadOnlyMode, erSecureTransport:
			return true
		}
		return false
	}
	switch {
	case errors.Is(err, driver.ErrNoTLS), errors.Is(err, driver.ErrCleartextPassword),
		errors.Is(err, driver.ErrNativePassword), errors.Is(err, driver.ErrOldPassword),
		errors.Is(err, driver.ErrUnknownPlugin), errors.Is(err, driver.ErrOldProtocol):
		return true
	case lease.BadCertificate(err):
		return true
	}
	return false
}

// serverError reports whether err is an error number the server sent.
func serverError(err error, numbers ...uint16) bool {
	var myErr *driver.MySQLError
	if !errors.As(err, &myErr) {
		return false
	}
	for _, n := range numbers {
		if myErr.Number == n {
			return true
		}
	}
	return false
}

// errorPolicy is how this store's errors are reported (lease.ErrorPolicy).
var errorPolicy = lease.ErrorPolicy{Permanent: permanent, Hint: hintFor}

// wrapError adds op as context to err, marks it lease.ErrRefused when no
// retry can fix it, and scrubs secrets from its text (lease.ErrorPolicy.Wrap).
func wrapError(op string, err error, secrets []string) error {
	return errorPolicy.Wrap(op, err, secrets)
}

// hintFor says what to do about a permanent error, where the server's
// message does not.
func hintFor(err error) string {
	var myErr *driver.MySQLError
	switch {
	case errors.Is(err, driver.ErrNoTLS):
		return "the server does not offer TLS; drop tls=true or enable TLS on the server"
	case !errors.As(err, &myErr):
		return ""
	}
	switch myErr.Number {
	case erDBAccessDenied, erTableAccessDenied, erColumnAccessDenied, erProcAccessDenied, erSpecificAccess:
		return "the user needs the privileges listed in the lease/mysql documentation, or an administrator creates the tables ahead of time with mysql.SchemaSQL"
	case erOptionPrevents, erReadOnlyTransaction, erReadOnlyMode:
		return "the server or session is read-only; point the DSN at the primary"
	case erBinlogIsolation:
		return "leaderrun's sessions use READ COMMITTED, which binlog_format=STATEMENT cannot log; use ROW or MIXED"
	}
	return ""
}
