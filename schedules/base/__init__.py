"""What every layer of ``schedules`` uses: errors that name the file, line and field
(``errors``), files users give and files written atomically (``files``), plain-text tables
(``text_table``) and a child process's stderr (``child_stderr``). Imports no other folder."""
