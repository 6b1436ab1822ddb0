"""Process trees from /proc (Linux), for the scripts that must reach every
rank of a job: MPICH's launcher runs its proxy and each rank in a session
of their own, so neither the job's session nor its process group holds
them. Only the Python standard library."""
import os


def descendants(root):
    """(pid, name) of every process below `root`, parents before children."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The name may hold spaces and parentheses: the fields follow the last ")".
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(d), name))
    found, todo = [], [root]
    while todo:
        for pid, name in children.get(todo.pop(), []):
            found.append((pid, name))
            todo.append(pid)
    return found
