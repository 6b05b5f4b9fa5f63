// Package archtest holds no code, only a test: it checks that every import
// of the module points down the four floors of docs/architecture.md, so the
// policy libraries never come to depend on a server.
package archtest
