// Package hostile generates hostile inputs for tests.
package hostile
