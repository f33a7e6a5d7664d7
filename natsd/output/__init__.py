"""What the server writes for its operators: the log in nats-server's format (`logger`), the
log file's rotation (`rotation`), syslog (`syslog`), and the ports file (`ports_file`);
`program` names the executable as these outputs show it."""
