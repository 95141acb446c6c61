"""Views of a finished tree; each takes plain data (the tree, the summary, the recording), never the
object that produced it. ``rows`` holds the row-selection rules every view shares; ``cells`` and
``format`` the columns and number text; ``frame`` (pandas), ``table`` (terminal), ``payload`` and
``widget`` (the notebook), ``html`` (report page and static table) and ``exports`` are the views."""
