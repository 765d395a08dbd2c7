//go:build !linux

package run

func probe() int         { return 97 }
func attemptsChild() int { return 97 }
func argvChild() int     { return 97 }
