
# seconds a wait may last before the script stops, and between two looks at the cluster
$WaitTimeout = if ($env:PLBJAX_WAIT_TIMEOUT) { [int]$env:PLBJAX_WAIT_TIMEOUT } else { @TIMEOUT@ }
$PollSeconds = if ($env:PLBJAX_POLL_SECONDS) { [double]$env:PLBJAX_POLL_SECONDS } else { @POLL@ }
$StartAt = if ($env:PLBJAX_START_AT) { [int]$env:PLBJAX_START_AT } else { 1 }  # those before: taken as issued
$Total = @TOTAL@
$PlanSteps = @{}
$Confirmed = @{}
function Write-Plbjax([string]$Text) {
    # a line on stderr, with the UTC time
    $stamp = [DateTime]::UtcNow.ToString("yyyy-MM-dd'T'HH:mm:ss'Z'", [Globalization.CultureInfo]::InvariantCulture)
    [Console]::Error.WriteLine("$stamp plbjax: $Text")
}
function Stop-Plbjax([int]$Status, [string]$Why) {
    Write-Plbjax "stopped: $Why"
    exit $Status
}
function Add-PlbjaxStep([int]$Step, [string]$What, [string]$PartitionId, [string]$Action, [string]$Source,
    [string]$Target, [int[]]$Closure, [int]$Expected) {
    # a row of the steps' table; Closure: the steps done once it is; Expected: the Ready replicas of an add's role
    $PlanSteps[$Step] = [pscustomobject]@{ What = $What; PartitionId = $PartitionId; Action = $Action
        Source = $Source; Target = $Target; Closure = $Closure; Expected = $Expected }
}
function Get-PlbjaxHolding([string]$PartitionId) {
    # node -> what it holds of the partition (expectations.py's rule): an auxiliary replica is Auxiliary;
    # else a Ready 'Primary' is a Primary, a Ready 'ActiveSecondary' a Secondary, a Ready replica without
    # a role an Instance; one not Ready, or in any other role ('IdleSecondary', 'None', ...), is InBuild;
    # a Down, Dropped, Standby or Invalid replica holds nothing
    $held = @{}
    foreach ($replica in @(Get-ServiceFabricReplica -PartitionId $PartitionId)) {
        $status, $sfRole, $node = "$($replica.ReplicaStatus)", "$($replica.ReplicaRole)", "$($replica.NodeName)"
        if ($status -in 'Down', 'Dropped', 'Standby', 'Invalid' -or -not $node) { continue }
        $role = if ($sfRole -like '*auxiliary*') { 'Auxiliary' } elseif ($status -ne 'Ready') { 'InBuild' }
        elseif (-not $sfRole) { 'Instance' }
        elseif ($sfRole -eq 'Primary') { 'Primary' } elseif ($sfRole -eq 'ActiveSecondary') { 'Secondary' }
        else { 'InBuild' }
        if (-not $held.ContainsKey($node) -or $held[$node].Role -eq 'InBuild') {
            $words = if ($sfRole) { "$sfRole ($status)" } else { "an instance ($status)" }
            $held[$node] = [pscustomobject]@{ Role = $role; Words = $words }
        }
    }
    return $held
}
function Read-PlbjaxPartition([string]$PartitionId) {
    # what the partition's nodes hold, asking again while the cluster does not answer
    $deadline = (Get-Date).AddSeconds($WaitTimeout)
    while ($true) {
        try { return Get-PlbjaxHolding $PartitionId }
        catch {
            if ((Get-Date) -ge $deadline) {
                $why = Format-PlbjaxError $_
                Stop-Plbjax 3 "the cluster has not answered for $WaitTimeout s (PLBJAX_WAIT_TIMEOUT): $why"
            }
            Write-Plbjax "the cluster did not answer ($(Format-PlbjaxError $_)); asking again"
            Start-Sleep -Milliseconds ([int](1000 * $PollSeconds))
        }
    }
}
function Get-PlbjaxExpected([string]$When, $Step) {
    # node -> role ('-': no replica) the partition shows when the step may start ('Before') or once it is done
    $kind, $src, $dst, $expected = $Step.Action, $Step.Source, $Step.Target, @{}
    if ($kind -eq 'SwapPrimarySecondary') {
        if ($When -eq 'Before') { $expected[$src] = 'Primary'; $expected[$dst] = 'Secondary' }
        else { $expected[$dst] = 'Primary'; $expected[$src] = 'Secondary' }
    } elseif ($kind.StartsWith('Move')) {
        if ($When -eq 'Before') { $expected[$src] = $kind.Substring(4); $expected[$dst] = '-' }
        else { $expected[$dst] = $kind.Substring(4); $expected[$src] = '-' }
    } elseif ($kind -eq 'PromoteSecondary') {
        $expected[$dst] = if ($When -eq 'Before') { 'Secondary' } else { 'Primary' }
    } elseif ($When -ne 'Before') {
        if ($kind.StartsWith('Drop')) { $expected[$src] = '-' } else { $expected[$dst] = $kind.Substring(3) }
    }
    return $expected
}
function Get-PlbjaxMismatch($Held, $Expected) {
    # each node whose holding is not the expected one, in SF's words (none when all match)
    foreach ($node in $Expected.Keys) {
        $role, $holding = $Expected[$node], $Held[$node]
        if ($role -eq '-' -and $holding) { "$node still holds $($holding.Words)" }
        elseif ($role -ne '-' -and (-not $holding -or $holding.Role -ne $role)) {
            $want = if ($role -eq 'Secondary') { 'ActiveSecondary' } else { $role }
            $has = if ($holding) { $holding.Words } else { 'no replica' }
            "$node holds $has, not a Ready $want"
        }
    }
}
function Format-PlbjaxError($Failure) {
    # SF's error: its code (a FabricException's ErrorCode) and message, on one line
    $e = $Failure.Exception
    $code = if ($e.PSObject.Properties['ErrorCode']) { "$($e.ErrorCode): " } else { '' }
    return ($code + $e.Message) -replace '\s+', ' '
}
function Confirm-PlbjaxStep([int]$Step) {
    # the step is done, and so are the steps it needs
    $Confirmed[$Step] = $true
    foreach ($d in $PlanSteps[$Step].Closure) { $Confirmed[$d] = $true }
}
function Find-PlbjaxDone([int[]]$Steps) {
    # those of these steps (of one partition) already done, by a run before this one
    $held = Read-PlbjaxPartition $PlanSteps[$Steps[0]].PartitionId
    foreach ($k in $Steps) {
        $wrong = @(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'After' $PlanSteps[$k]))
        if ($wrong.Count -eq 0) { Confirm-PlbjaxStep $k }
    }
}
function Invoke-PlbjaxStep([int]$Step, [scriptblock]$Command) {
    # unless the step is done or before PLBJAX_START_AT, check and run its command
    $s = $PlanSteps[$Step]
    if (-not $Confirmed[$Step] -and $Step -ge $StartAt) {
        $held = Read-PlbjaxPartition $s.PartitionId
        if (@(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'After' $s)).Count -eq 0) { Confirm-PlbjaxStep $Step }
        else {
            $wrong = @(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'Before' $s))
            if ($wrong.Count) {
                $why = $wrong -join '; '
                Stop-Plbjax 4 "step $Step/$Total ($($s.What)): the replica is not where the plan assumed: $why"
            }
        }
    }
    if ($Confirmed[$Step]) { Write-Plbjax "step $Step/$Total already done, not issued: $($s.What)" }
    elseif ($Step -lt $StartAt) {
        Write-Plbjax "step $Step/$Total taken as issued (PLBJAX_START_AT=$StartAt): $($s.What)"
    }
    else {
        Write-Plbjax "step $Step/$($Total): $($s.What)"
        try { & $Command | Out-Null }
        catch { Stop-Plbjax 4 "step $Step/$Total ($($s.What)) refused: $(Format-PlbjaxError $_)" }
    }
}
function Write-PlbjaxFailoverStep([int]$Step) {
    # a step of the Failover Manager's, without a command
    if ($Confirmed[$Step]) { Write-Plbjax "step $Step/$Total already done: $($PlanSteps[$Step].What)" }
    else { Write-Plbjax "step $Step/$Total left to the Failover Manager (no command): $($PlanSteps[$Step].What)" }
}
function Wait-PlbjaxDone([int]$Step, [bool]$Anywhere, [string]$Then) {
    # poll until the step is done (an add, $Anywhere: or its role's Ready replicas as planned), or stop (exit 3)
    $s, $deadline = $PlanSteps[$Step], (Get-Date).AddSeconds($WaitTimeout)
    while ($true) {
        $held = Read-PlbjaxPartition $s.PartitionId
        $wrong = @(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'After' $s))
        $role = $s.Action.Substring(3)
        $have = @($held.Values | Where-Object { $_.Role -eq $role }).Count
        if ($wrong.Count -eq 0) { $how = '' }
        elseif ($Anywhere -and $s.Action.StartsWith('Add') -and $s.Expected -gt 0 -and $have -eq $s.Expected) {
            $word = if ($role -eq 'Secondary') { 'ActiveSecondary' } else { $role }
            $how = " (placed elsewhere by the Failover Manager: the partition holds the $have Ready " +
                "$($word)(s) planned)"
        } else {
            if ((Get-Date) -ge $deadline) {
                $why = "$($wrong -join '; '); $Then"
                Stop-Plbjax 3 "step $Step ($($s.What)) is not done after $WaitTimeout s (PLBJAX_WAIT_TIMEOUT): $why"
            }
            Start-Sleep -Milliseconds ([int](1000 * $PollSeconds))
            continue
        }
        Confirm-PlbjaxStep $Step
        Write-Plbjax "step $Step/$Total done$($how): $($s.What)"
        return
    }
}
function Wait-PlbjaxStep([int]$Step, [int]$Needed) {
    # before step $Step, poll until step $Needed is done (unless known), or stop
    if ($Step -lt $StartAt -or $Confirmed[$Step] -or $Confirmed[$Needed]) { return }
    Wait-PlbjaxDone $Needed $false "step $Step and those after it have not run"
}
function Complete-PlbjaxPlan {
    # after the last step: wait for each step not confirmed yet, last first, then say all is done
    for ($k = $Total; $k -ge 1; $k--) {
        if (-not $Confirmed[$k]) { Wait-PlbjaxDone $k $true 'the steps before it may not be done either' }
    }
    Write-Plbjax "all $Total step(s) done"
}
